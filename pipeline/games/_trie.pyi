"""Type stub of the optional C kernels of strgame (games/_trie.c)."""

def outcomes(text: str, /) -> int: ...
def scan_chunk(
    block: bytes | bytearray | memoryview,
    pos: int,
    cases_left: int,
    target_work: int,
    max_cases: int,
    max_token: int,
    final: bool,
    cases: int,
    work: int,
    /,
) -> tuple[int, int, int, int]: ...
def solve_slice(cases: bytes | memoryview, count: int, /) -> bytes: ...
