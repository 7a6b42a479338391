"""Type stub of the optional C kernels of pathgame (games/_pathgame.c)."""

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
def solve_slice(
    boards: bytes | memoryview, count: int, open_table: bytes, border_table: bytes, /
) -> bytes: ...
