#!/usr/bin/env python3
"""Docs that cannot go stale: every `mdtp` command shown in README.md and docs/*.md still runs.

The fenced code blocks of each document are read in order; every command line that runs `mdtp`
(`mdtp …`, `./build/mdtp …`, `build/mdtp …`, `mpiexec -n N mdtp …`; lines joined at a trailing
backslash) is run from one scratch directory per document, so a command may read what an
earlier one of the same document wrote (`--write-config run.json`, then `--config run.json`).
It must exit 0 — or, where the document shows it refused (the next line is `mdtp CMD: error: …`),
exit 2 with that line.

Code blocks are fenced (```), indented by four spaces, or inline spans holding a whole command.
Not run, and listed as skipped with the reason:
  - lines with placeholders (`...`, `…`, `<…>`, `[…]`, `FILE`, `PSI`, upper-case stand-ins like `N`);
  - GPU lines (`--device cuda`, `build-cuda`, `srun`, `sbatch`), and more than 8 ranks;
  - blocks after a `<!-- docs-test: skip (why) -->` line;
A line may be scaled down for the test by a marker comment at its end, `# docs-test: ARGS`,
whose arguments are appended (a later flag overrides an earlier one: `# docs-test: --steps 1`).

Usage: test_docs_examples.py --mdtp BIN --mpiexec MPIEXEC --root REPO [--list]
Prints every command with its status, then "N passed, M failed" (and the skipped count).
"""
import argparse
import os
import pathlib
import re
import shlex
import subprocess
import sys
import tempfile

TIMEOUT = 300
MAX_RANKS = 8
PLACEHOLDER = re.compile(r"\.\.\.|…|<[^>]*>|\[[^\]]*\]|\bFILE\b|\bPSI\b|\bCKPT\b|\b[A-Z]\b(?!\.)")
GPU = re.compile(r"--device cuda|build-cuda|\bsrun\b|\bsbatch\b|nvidia-smi")


def blocks(text):
    """(line number, lines, skip marker) of each code block, in order: fenced blocks, indented
    blocks (four spaces after a blank line), and inline code spans that hold a whole command
    (`mdtp CMD --…`)."""
    out, inside, start, lines, skip = [], False, 0, [], None
    indented, previous_blank = None, True
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not inside and stripped.startswith("<!-- docs-test: skip"):
            skip = stripped
            continue
        if stripped.startswith("```"):
            if inside:
                out.append((start, lines, skip))
                inside, lines, skip = False, [], None
            else:
                inside, start = True, n + 1
            continue
        if inside:
            lines.append(line)
            continue
        if line.startswith("    ") and (indented is not None or previous_blank):
            if indented is None:
                indented = (n, [])
            indented[1].append(line[4:])
        elif indented is not None:
            out.append((indented[0], indented[1], skip))
            indented, skip = None, None
        # An inline span counts when it is a whole command: not a heading, and at least two
        # options with a value each (`mdtp train --save` names an option, it runs nothing).
        for span in re.findall(r"`((?:\./)?(?:build/)?mdtp [a-z]+ --[^`]*)`", line):
            if not stripped.startswith("#") and len(span.split()) >= 6:
                out.append((n, [span], skip))
        previous_blank = not stripped
    if indented is not None:
        out.append((indented[0], indented[1], skip))
    return out


def commands(block_lines):
    """(command, expected error or None) for each logical line (continuations joined) that runs
    mdtp.  A command shown followed by its refusal (`mdtp CMD: error: TEXT`) must be refused so."""
    joined, current = [], ""
    for line in block_lines:
        text = line.rstrip()
        if text.endswith("\\"):
            current += text[:-1] + " "
            continue
        joined.append(current + text)
        current = ""
    joined = [l.strip()[2:] if l.strip().startswith("$ ") else l.strip() for l in joined]
    out = []
    for i, line in enumerate(joined):
        if re.match(r"^(MDTP_\w+=\S+\s+)*((mpiexec|mpirun)\S*\s.*\s)?(\./)?(build/)?mdtp\s+[a-z-]+(\s|$)", line):
            following = joined[i + 1] if i + 1 < len(joined) else ""
            error = re.match(r"^mdtp [a-z]+: error: (.*)$", following)
            out.append((line, error.group(1) if error else None))
    return out


def prepare(line, mdtp, mpiexec):
    """(argv, env, why-skipped) for one documented command."""
    marker = ""
    if "# docs-test:" in line:
        line, marker = line.split("# docs-test:", 1)
    line = re.sub(r"\s+#.*$", "", line).strip()  # a trailing comment
    if GPU.search(line):
        return None, None, "needs a GPU"
    if PLACEHOLDER.search(line):
        return None, None, "has placeholders"
    try:
        words = shlex.split(line) + shlex.split(marker)
    except ValueError as e:
        return None, None, f"cannot be split: {e}"
    env = dict(os.environ)
    while words and re.match(r"^\w+=", words[0]):
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    if words and words[0].startswith(("mpiexec", "mpirun")):
        if "-n" not in words:
            return None, None, "an mpiexec line without -n"
        ranks = int(words[words.index("-n") + 1])
        if ranks > MAX_RANKS:
            return None, None, f"{ranks} ranks (more than {MAX_RANKS})"
        i = next(k for k, w in enumerate(words) if w.endswith("mdtp"))
        words = [mpiexec, "-n", str(ranks), mdtp] + words[i + 1:]
    else:
        words = [mdtp] + words[1:]
    return words, env, None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mdtp", required=True)
    parser.add_argument("--mpiexec", required=True)
    parser.add_argument("--root", required=True)
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()
    root = pathlib.Path(args.root)
    documents = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
    ran = failed = skipped = 0
    failures = []
    for doc in documents:
        with tempfile.TemporaryDirectory() as scratch:
            for start, lines, skip in blocks(doc.read_text()):
                for line, refusal in commands(lines):
                    where = f"{doc.relative_to(root)}:{start}"
                    if skip:
                        skipped += 1
                        print(f"skip {where}: {line}  ({skip})")
                        continue
                    argv, env, why = prepare(line, args.mdtp, args.mpiexec)
                    if argv is None:
                        skipped += 1
                        print(f"skip {where}: {line}  ({why})")
                        continue
                    if args.list:
                        print(f"run  {where}: {' '.join(argv)}")
                        continue
                    ran += 1
                    try:
                        r = subprocess.run(argv, cwd=scratch, env=env, capture_output=True, text=True,
                                           timeout=TIMEOUT, stdin=subprocess.DEVNULL)
                        status, tail = r.returncode, (r.stderr or r.stdout)[-600:]
                    except subprocess.TimeoutExpired:
                        status, tail = "timeout", ""
                    if refusal is None:
                        ok = status == 0
                    else:  # shown being refused: exit 2 and the line shown (up to a placeholder)
                        shown = re.split(r"\.\.\.|…", refusal)[0].strip()
                        ok = status == 2 and shown in (r.stderr if status != "timeout" else "")
                    print(f"{'ok  ' if ok else 'FAIL'} {where}: {' '.join(argv[argv.index(args.mdtp):])}"
                          f"{'' if ok else f'  -> exit {status}: {tail.strip()}'}")
                    if not ok:
                        failed += 1
                        failures.append(where)
    print(f"{ran} examples run from {len(documents)} documents, {skipped} skipped")
    print(f"{ran - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
