"""`gen`, `validate`, `package` and `stress`: the game toolkit, run in this process."""

from __future__ import annotations

import io
import sys

from pipeline.cli.front import Front, err
from pipeline.data.files import atomic_write, check_output
from pipeline.errors import InputError, UsageError
from pipeline.games import toolkit
from pipeline.games.registry import get_problem


def gen(front: Front) -> int:
    args = front.args
    problem = get_problem(args.problem)
    if args.cases < 1 or args.size < 1:
        raise UsageError("--cases and --size must be at least 1")
    if args.output is not None:
        check_output(args.output)
    cases = list(toolkit.generate(problem, args.cases, args.seed, args.shape, args.size))
    text = io.StringIO()
    toolkit.write_input(problem, cases, text)
    if args.output is None:
        sys.stdout.write(text.getvalue())
    else:
        atomic_write(args.output, text.getvalue())
    return 0


def validate(front: Front) -> int:
    args = front.args
    settings = front.settings()
    problem = get_problem(args.problem)
    status = 0
    for path in args.inputs:
        try:
            count = toolkit.validate(problem, path, settings.limits, strict=args.strict)
        except InputError as exc:
            err(f"error: {exc}")
            status = 2
            continue
        print(f"{path}: {count} valid cases")
    return status


def stress(front: Front) -> int:
    from pipeline.local import programs

    args = front.args
    problem = get_problem(args.problem)
    if args.program:
        solver = programs.program_solver(problem, args.program)
    elif args.solver:
        solver = programs.function_solver(problem, args.solver)
    else:
        solver = toolkit.in_process_solver(problem)
    count, mismatch = toolkit.stress(problem, solver, args.cases, args.seed, size=args.size)
    if mismatch is None:
        print(f"{count} cases: the solver agrees with exhaustive search")
        return 0
    print(f"mismatch: the solver says {mismatch.found}, exhaustive search says {mismatch.expected}")
    print("smallest failing input found:")
    sys.stdout.write("1\n" + problem.format_case(mismatch.case))
    return 1


def package(front: Front) -> int:
    from pipeline.packages.export import Export, export

    args = front.args
    written = export(Export(get_problem(args.problem), args.out, args.seed, args.hacks))
    tests = sum(1 for name in written if name.endswith(".in"))
    sys.stdout.write(f"{args.out}: a package of {tests} tests ({len(written)} files)\n")
    return 0
