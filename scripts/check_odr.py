#!/usr/bin/env python3
"""One name per type: fails when two files define a class, struct, union or enum of the
same name with external linkage: in one namespace that is a one-definition-rule violation (the
linker keeps one of them and the other's users run its code); in two of pipesim's it is two
types a reader takes for one.

    scripts/check_odr.py [ROOT]      exit 0 when every name is defined once, else 1

Scans the project's C++ sources (not build trees, tests or fuzzers, which define their own
helpers in anonymous namespaces or in one file each). A type counts when every brace that
encloses it opens a named namespace; types in anonymous namespaces, inside functions or
inside other types are local and skipped. Runs as the `one_name_per_type` test.
"""
import pathlib
import re
import sys

FOLDERS = ("api", "apps", "backend", "core", "cuda", "parallel", "planner", "python",
           "scenario", "schedules", "sim", "sweep", "topology", "costs")
TOKEN = re.compile(
    r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|R"(?P<d>[^(\s]*)\(.*?\)(?P=d)"'
    r'|\bnamespace\b\s*(?P<ns>[A-Za-z_][\w:]*)?\s*\{'
    r'|\b(?P<kw>class|struct|union|enum\s+class|enum\s+struct|enum)\s+(?:\[\[[^\]]*\]\]\s*)?'
    r'(?P<name>[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*)\s*(?:final\s*)?(?P<tail>[:{;])'
    r'|\btemplate\s*<'
    r'|[{}]', re.S)


def definitions(path: pathlib.Path):
    """(namespace, name, line) of every type defined at namespace scope with external linkage."""
    text = path.read_text(encoding="utf-8", errors="replace")
    stack = []  # per open brace: a namespace name, "" for an anonymous one, None otherwise
    pending = None  # a type whose '{' comes next
    for m in TOKEN.finditer(text):
        tok = m.group(0)
        if tok.startswith(("//", "/*", '"', "'", 'R"')):
            continue
        if m.group("kw"):
            # Only at namespace scope, and not a forward declaration.
            at_ns = all(s is not None for s in stack)
            if m.group("tail") == ";" or not at_ns:
                if m.group("tail") == "{":
                    stack.append(None)
                continue
            external = all(s != "" for s in stack)
            ns = "::".join(s for s in stack if s)
            if m.group("tail") == "{":
                stack.append(None)
                if external:
                    yield ns, m.group("name"), text.count("\n", 0, m.start()) + 1
            else:  # base-class list or enum base: the body's brace follows
                pending = (ns, m.group("name"), text.count("\n", 0, m.start()) + 1, external)
            continue
        if tok.startswith("namespace"):
            stack.append(m.group("ns") or "")
            continue
        if tok == "{":
            if pending is not None:
                ns, name, line, external = pending
                pending = None
                if external:
                    yield ns, name, line
            stack.append(None)
        elif tok == "}":
            if stack:
                stack.pop()
        # template <...>: a template's definition is one per name too; nothing to track


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
    seen = {}
    problems = []
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in (".h", ".cc", ".cu", ".cuh") or not path.is_file():
                continue
            for ns, name, line in definitions(path):
                # One name per type across namespaces too (pipesim::X and pipesim::api::X
                # are two types a reader takes for one).
                key = name
                where = f"{path.relative_to(root)}:{line} ({ns or 'global'}::{name})"
                if key in seen and seen[key].split(":")[0] != where.split(":")[0]:
                    problems.append(f"{key} is defined in {seen[key]} and in {where}")
                seen.setdefault(key, where)
    for p in problems:
        print(f"check_odr: {p}", file=sys.stderr)
    if not problems:
        print(f"check_odr: {len(seen)} types, each defined once")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
