#!/usr/bin/env python3
"""The trainer stays a step loop: train() fits on one screen, no function in src/train grows past a
screenful and a half, and the trainer's file stays small.  What grows belongs in an observer file
of its own (comm audit, memory audit, fault guard, results writer: src/train/*.cpp).

Usage: check_trainer_shape.py SRC_TRAIN_DIR.  Prints every function over the limits and exits 1,
else prints the largest functions and "N passed, 0 failed".

Functions are found by brace matching after comments, strings and character literals are removed:
a '{' at namespace or class level whose preceding declaration ends in ')' (optionally const,
noexcept, override, final or a trailing return type) or in a constructor's initializer list opens a
function body."""
import pathlib
import re
import sys

LIMITS = {"train": 60}      # named functions with their own limit (lines, braces included)
ANY_FUNCTION = 150          # every other function in src/train
TRAINER_FILE = ("trainer.cpp", 300)

FUNCTION_END = re.compile(r"\)\s*(const\s*)?(noexcept\s*)?(override\s*|final\s*)*(->\s*[\w:<>,\s*&]+)?$")
INIT_LIST = re.compile(r"\)\s*:\s*[\w:]")


def strip(code):
    """Comments, string and character literals blanked out; newlines kept so lines still count."""
    out, i, n = [], 0, len(code)
    while i < n:
        c = code[i]
        if code.startswith("//", i):
            j = code.find("\n", i)
            i = n if j < 0 else j
        elif code.startswith("/*", i):
            j = code.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * code.count("\n", i, j))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and code[j] != c:
                j += 2 if code[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    """(name, first line, last line) of every function body in the file."""
    code = strip(path.read_text())
    found, stack, text, line = [], [], "", 1
    for c in code:
        if c == "\n":
            line += 1
        if c == "{":
            decl = text.strip()
            level = stack[-1][0] if stack else "namespace"
            if level in ("namespace", "type"):
                if re.search(r"\bnamespace\b", decl) or (not decl and not stack):
                    stack.append(("namespace", line, ""))
                elif re.match(r"^(template\s*<.*>\s*)?(class|struct|union|enum)\b", decl) and "(" not in decl:
                    stack.append(("type", line, ""))
                elif FUNCTION_END.search(decl) or (INIT_LIST.search(decl) and decl[-1] in ")}"):
                    name = re.findall(r"([~\w]+)\s*\(", decl.split("(")[0] + "(")
                    stack.append(("function", line, name[-1] if name else "?"))
                elif INIT_LIST.search(decl):
                    stack.append(("init", line, ""))  # a member's brace initializer
                    continue
                else:
                    stack.append(("block", line, ""))
            else:
                stack.append(("block", line, ""))
            text = ""
            continue
        if c == "}":
            kind, start, name = stack.pop() if stack else ("block", line, "")
            if kind == "function":
                found.append((name, start, line))
            if kind == "init":
                text += "{}"
                continue
            text = ""
            continue
        if c == ";":
            text = ""
            continue
        text += c
    return found


def main():
    root = pathlib.Path(sys.argv[1])
    files = sorted(root.glob("*.cpp")) + sorted(root.glob("*.hpp"))
    failures, sizes, checks = [], [], 0
    for path in files:
        for name, first, last in functions(path):
            length = last - first + 1
            limit = LIMITS.get(name, ANY_FUNCTION)
            sizes.append((length, f"{path.name}:{first} {name}"))
            checks += 1
            if length > limit:
                failures.append(f"{path.name}:{first}: {name}() has {length} lines; at most {limit}")
    trainer = root / TRAINER_FILE[0]
    lines = len(trainer.read_text().splitlines())
    checks += 1
    if lines >= TRAINER_FILE[1]:
        failures.append(f"{trainer.name} has {lines} lines; fewer than {TRAINER_FILE[1]} expected")
    if not any(s[1].endswith(" train") for s in sizes):
        failures.append("no function train() found in " + str(root))
    for f in failures:
        print(f)
    print("largest functions:", ", ".join(f"{where} ({n})" for n, where in sorted(sizes, reverse=True)[:5]))
    print(f"{trainer.name}: {lines} lines; train(): " +
          ", ".join(str(n) for n, where in sizes if where.endswith(" train")) + " lines")
    print(f"{checks - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
