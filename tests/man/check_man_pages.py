#!/usr/bin/env python3
"""Checks that the man pages document what the programs offer.

Usage: check_man_pages.py CHECKS.json       (written by tests/man/CMakeLists.txt)
       check_man_pages.py --self-test CHECKS.json

CHECKS.json:
  {"man_dir": DIR,
   "help": [{"exe": PATH, "page": "pilot.1"}, ...],
   "keys": [{"command": [PATH, ARG...], "page": "pilot.toml.5"}, ...],
   "skipped": ["pilot-runner (not built)", ...]}

Fails (exit 1, one line per problem) when
  (a) a key printed by a "keys" command ("section.key" a line) is not a .TP
      tag inside the ".SS [section]" of its page, or the page documents a key
      of such a section that the program does not know;
  (b) a --flag printed by "EXE --help" is not in its page, a command listed
      under "Commands:" in that help has no ".SS" heading starting with its
      name, or a --flag printed by "EXE COMMAND --help" is not in that .SS;
  (c) groff reports a warning or an error for any man page (*.1 ... *.8).
--self-test breaks a copy of the pages in each of these ways and fails
unless every break is caught.
"""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

FLAG_RE = re.compile(r"(?<![A-Za-z0-9-])--[a-z0-9][a-z0-9-]*")
PAGE_RE = re.compile(r".*\.[1-8]$")


def roff_text(source):
    """The page's source with comments dropped and escapes a reader would not
    type removed: \\- becomes -, font changes and zero-width marks vanish."""
    out = []
    for line in source.splitlines():
        if line.startswith('.\\"') or line.startswith("'\\\""):
            continue
        line = line.replace("\\-", "-").replace("\\(dq", '"').replace("\\e", "\\")
        line = re.sub(r"\\f(\[[^\]]*\]|\(..|.)", "", line)
        line = line.replace("\\&", "").replace("\\%", "").replace("\\c", "")
        out.append(line)
    return out


def subsections(lines):
    """{heading: [lines]} for every .SS; the heading without quotes."""
    result = {}
    current = None
    for line in lines:
        if line.startswith(".SS"):
            current = line[3:].strip().strip('"')
            result[current] = []
        elif line.startswith(".SH"):
            current = None
        elif current is not None:
            result[current].append(line)
    return result


def first_word_of_macro_line(line):
    line = re.sub(r"^\.[A-Z]{1,2}\s+", "", line.strip())
    line = line.lstrip('"')
    match = re.match(r"[A-Za-z0-9_.\[\]-]+", line)
    return match.group(0) if match else ""


def tp_tags(lines):
    """First words of the tag lines of .TP paragraphs."""
    tags = []
    for i, line in enumerate(lines):
        if line.startswith(".TP") and i + 1 < len(lines):
            tags.append(first_word_of_macro_line(lines[i + 1]))
    return tags


# The binaries do not change while the check runs (the self-test edits only
# pages): each command runs once, each page's text is typeset once.
_outputs = {}
_groff = {}


def run(command):
    key = tuple(command)
    if key not in _outputs:
        proc = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, timeout=60)
        _outputs[key] = (proc.returncode, proc.stdout + proc.stderr)
    return _outputs[key]


def groff_messages(path):
    """groff's exit status and warnings for the page at path."""
    with open(path, "rb") as f:
        key = hashlib.sha256(f.read()).hexdigest()
    if key not in _groff:
        proc = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", path],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _groff[key] = (proc.returncode, proc.stderr.strip())
    return _groff[key]


def check_keys(man_dir, entry, problems):
    page = entry["page"]
    rc, output = run(entry["command"])
    if rc != 0:
        problems.append(f"{' '.join(entry['command'])}: exit status {rc}")
        return
    keys = [k.strip() for k in output.splitlines() if k.strip()]
    if not keys:
        problems.append(f"{' '.join(entry['command'])}: printed no keys")
        return
    if not os.path.exists(os.path.join(man_dir, page)):
        problems.append(f"{page}: missing")
        return
    with open(os.path.join(man_dir, page), encoding="utf-8") as f:
        sections = subsections(roff_text(f.read()))
    known = {}
    for key in keys:
        section, _, name = key.partition(".")
        known.setdefault(section, set()).add(name)
    for section, names in known.items():
        heading = f"[{section}]"
        if heading not in sections:
            problems.append(f"{page}: no '.SS {heading}' for the keys of section {section}")
            continue
        documented = set(tp_tags(sections[heading]))
        for name in sorted(names - documented):
            problems.append(f"{page}: key {section}.{name} is not documented under {heading}")
        for name in sorted(documented - names):
            problems.append(f"{page}: {heading} documents {name}, which is not a key")


def help_commands(text):
    """Command names listed under a 'Commands:' line of a --help output."""
    names = []
    in_commands = False
    for line in text.splitlines():
        if line.strip() == "Commands:":
            in_commands = True
            continue
        if in_commands:
            match = re.match(r"^  ([a-z][a-z0-9-]*)(\s{2,}|$)", line)
            if not match:
                break
            names.append(match.group(1))
    return names


def check_help(man_dir, entry, problems):
    exe, page = entry["exe"], entry["page"]
    name = os.path.basename(exe)
    if not os.path.exists(os.path.join(man_dir, page)):
        problems.append(f"{page}: missing (the man page of {name})")
        return
    with open(os.path.join(man_dir, page), encoding="utf-8") as f:
        lines = roff_text(f.read())
    text = "\n".join(lines)
    sections = subsections(lines)
    rc, output = run([exe, "--help"])
    if rc != 0:
        problems.append(f"{name} --help: exit status {rc}")
        return
    documented = set(FLAG_RE.findall(text))
    for flag in sorted(set(FLAG_RE.findall(output)) - documented):
        problems.append(f"{page}: {name} flag {flag} is not documented")
    for command in help_commands(output):
        heading = next((h for h in sections if h.split()[0:1] == [command]), None)
        if heading is None:
            problems.append(f"{page}: command '{name} {command}' has no '.SS {command}'")
            continue
        section_flags = set(FLAG_RE.findall("\n".join(sections[heading])))
        rc, sub = run([exe, command, "--help"])
        if rc != 0:
            problems.append(f"{name} {command} --help: exit status {rc}")
            continue
        if sub == output:
            continue  # "help --help" is the program's own help, checked above
        # --help is documented once for all commands.
        for flag in sorted(set(FLAG_RE.findall(sub)) - section_flags - {"--help"}):
            problems.append(f"{page}: flag {flag} of '{name} {command}' is not documented "
                            f"in its .SS {command}")


def check_groff(man_dir, problems):
    if shutil.which("groff") is None:
        problems.append("groff is not installed (scripts/setup installs groff-base)")
        return
    for page in sorted(os.listdir(man_dir)):
        if not PAGE_RE.match(page):
            continue
        rc, message = groff_messages(os.path.join(man_dir, page))
        if rc != 0 or message:
            problems.append(f"{page}: groff: {message or 'exit status %d' % rc}")


def check_all(checks, quiet=False):
    problems = []
    man_dir = checks["man_dir"]
    for entry in checks.get("keys", []):
        check_keys(man_dir, entry, problems)
    for entry in checks.get("help", []):
        if not os.path.exists(entry["exe"]):
            if not quiet:
                print(f"check_man_pages: skipped {entry['exe']} (not built)")
            continue
        check_help(man_dir, entry, problems)
    check_groff(man_dir, problems)
    return problems


def self_test(checks):
    """Each way of breaking a page must be caught."""
    failures = []
    baseline = set(check_all(checks, quiet=True))

    def broken(description, page, edit):
        with tempfile.TemporaryDirectory() as tmp:
            for name in os.listdir(checks["man_dir"]):
                if PAGE_RE.match(name):
                    shutil.copy(os.path.join(checks["man_dir"], name), tmp)
            path = os.path.join(tmp, page)
            with open(path, encoding="utf-8") as f:
                source = f.read()
            changed = edit(source)
            if changed == source:
                failures.append(f"{description}: the edit changed nothing")
                return
            with open(path, "w", encoding="utf-8") as f:
                f.write(changed)
            problems = [p.replace(tmp, checks["man_dir"])
                        for p in check_all(dict(checks, man_dir=tmp), quiet=True)]
            new = [p for p in problems if p not in baseline]
            if not new:
                failures.append(f"{description}: not detected")
            else:
                print(f"check_man_pages: self-test: detected {description}: {new[0]}")

    def drop_tp(tag):
        def edit(source):
            return re.sub(r"\.TP\n\.BR? " + re.escape(tag) + r"\b[^\n]*\n", "", source, count=1)
        return edit

    for entry in checks.get("keys", []):
        # Remove the first and the last documented key of the page.
        rc, output = run(entry["command"])
        keys = output.split()
        for key in (keys[0], keys[-1]):
            broken(f"missing key {key}", entry["page"], drop_tp(key.split(".", 1)[1]))
    for entry in checks.get("help", []):
        if not os.path.exists(entry["exe"]):
            continue
        page = entry["page"]
        rc, output = run([entry["exe"], "--help"])
        commands = help_commands(output)
        if commands:
            rc, sub = run([entry["exe"], commands[0], "--help"])
            flags = [f for f in FLAG_RE.findall(sub) if f != "--help"]
            if flags:
                roff_flag = flags[0].replace("-", "\\-")
                broken(f"missing flag {flags[0]}", page,
                       lambda s, r=roff_flag: s.replace(r, "\\-\\-undocumented"))
            broken(f"missing command {commands[0]}", page,
                   lambda s, c=commands[0]: re.sub(r"^\.SS " + re.escape(c) + r"\b", ".SS gone",
                                                   s, flags=re.M))
    pages = [p for p in os.listdir(checks["man_dir"]) if PAGE_RE.match(p)]
    if pages:
        broken("a groff warning", sorted(pages)[0], lambda s: s + ".ZZ unknown macro\n\\*[nosuchstring]\n")
    return failures


def main(argv):
    if len(argv) == 3 and argv[1] == "--self-test":
        with open(argv[2], encoding="utf-8") as f:
            checks = json.load(f)
        failures = self_test(checks)
        for failure in failures:
            print(f"check_man_pages: self-test: {failure}")
        return 1 if failures else 0
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        checks = json.load(f)
    for skipped in checks.get("skipped", []):
        print(f"check_man_pages: skipped {skipped}")
    problems = check_all(checks)
    for problem in problems:
        print(f"check_man_pages: {problem}")
    if not problems:
        built = [e for e in checks.get("help", []) if os.path.exists(e["exe"])]
        print(f"check_man_pages: ok ({len(built)} programs, "
              f"{len(checks.get('keys', []))} key lists)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
