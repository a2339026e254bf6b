#!/usr/bin/env python3
"""The house rules of docs/design.md, checked on the source tree.

Usage: check_structure.py SOURCE_DIR [RULE...]   (no RULE: every rule)

Each rule prints one line per breach, "pilot: structure: RULE: file:line: what",
and the script exits 1 when any rule is broken. The rules:

  rooms        core/ includes only core/, and each room of core/ only itself
               and the rooms before it: base, records, config, models, decide.
  runner       nothing outside runner/ (and tests/) includes runner/ or names
               pilot::runner.
  executables  the Slurm-side executables (spank_plugin, prolog, epilog, cli,
               supervisor) never include each other; job/ includes only core/;
               of them only supervisor/ includes launch/ (as runner/ does).
  launch       launch/ (how ranks start, shared by runner/ and supervisor/)
               includes only core/ and itself: no torch, no Slurm header.
  functions    no C++ function body is longer than 150 lines.
  sizes        no C++ class or struct is longer than 400 lines, and no source
               file (C++, or the probe's Python) outside tests/ than 800: a
               class or file that grows past them is split by concern.
  exits        pilot-runner's exit statuses (kExit*) are defined in
               core/records/exit_codes.h and nowhere else (cli/ has pilot's own).
  paths        no C++ source outside job/ spells a path under the state
               directory: job/state_layout.h (StateLayout) is the one place.
               See rule_paths for what counts.
"""
import os
import re
import sys

ROOMS = ["base", "records", "config", "models", "decide"]
EXECUTABLES = ["spank_plugin", "prolog", "epilog", "cli", "supervisor"]
MAX_FUNCTION_LINES = 150
MAX_CLASS_LINES = 400
MAX_FILE_LINES = 800
CODE_TOPS = ["core", "launch", "job", "runner", "supervisor", "spank_plugin", "prolog", "epilog", "cli"]
# The version header CMake generates (cmake/Version.cmake) for every part.
GENERATED_VERSION = "pilot/version.h"
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def sources(root, top):
    base = os.path.join(root, top)
    for d, _, files in os.walk(base):
        for f in sorted(files):
            if f.endswith((".cc", ".h", ".cu", ".h.in")):
                yield os.path.relpath(os.path.join(d, f), root)


def includes(root, path):
    with open(os.path.join(root, path), encoding="utf-8") as f:
        text = f.read()
    for m in INCLUDE.finditer(text):
        yield text.count("\n", 0, m.start()) + 1, m.group(1)


def rule_rooms(root):
    for path in sources(root, "core"):
        parts = path.split("/")
        room = parts[1] if len(parts) > 2 else None
        if room not in ROOMS:
            yield f"{path}:1: a file of core/ outside its rooms ({', '.join(ROOMS)})"
            continue
        for line, inc in includes(root, path):
            ip = inc.split("/")
            if ip[0] != "core":
                if "/" in inc and inc != GENERATED_VERSION:
                    yield f"{path}:{line}: includes {inc}: core/ includes only core/"
                continue
            if len(ip) < 3 or ip[1] not in ROOMS:
                yield f"{path}:{line}: includes {inc}: not a room of core/"
            elif ROOMS.index(ip[1]) > ROOMS.index(room):
                yield f"{path}:{line}: includes {inc}: core/{room} may use only " \
                      f"{', '.join(ROOMS[:ROOMS.index(room) + 1])}"


def rule_runner(root):
    for top in ["core", "launch", "job"] + EXECUTABLES:
        for path in sources(root, top):
            with open(os.path.join(root, path), encoding="utf-8") as f:
                text = f.read()
            for line, inc in includes(root, path):
                if inc.startswith("runner/"):
                    yield f"{path}:{line}: includes {inc}: only runner/ includes runner/"
            for m in re.finditer(r"\bpilot::runner\b|\brunner::", text):
                line = text.count("\n", 0, m.start()) + 1
                yield f"{path}:{line}: names {m.group(0)}: the runner's namespace stays in runner/"


def rule_executables(root):
    for top in EXECUTABLES + ["job"]:
        allowed = {"core", "job", top} if top != "job" else {"core", "job"}
        if top == "supervisor":
            allowed.add("launch")
        for path in sources(root, top):
            for line, inc in includes(root, path):
                first = inc.split("/")[0]
                if "/" in inc and first not in allowed and inc != GENERATED_VERSION:
                    yield f"{path}:{line}: includes {inc}: {top}/ uses only " \
                          f"{', '.join(sorted(allowed - {top}))} and itself"


# Headers of libraries launch/ must not need (angle-bracket includes).
LAUNCH_FORBIDDEN = re.compile(r'^\s*#\s*include\s+<(torch|ATen|c10|slurm)/', re.M)


def rule_launch(root):
    for path in sources(root, "launch"):
        for line, inc in includes(root, path):
            first = inc.split("/")[0]
            if "/" in inc and first not in {"core", "launch"} and inc != GENERATED_VERSION:
                yield f"{path}:{line}: includes {inc}: launch/ uses only core and itself"
        with open(os.path.join(root, path), encoding="utf-8") as f:
            text = f.read()
        for m in LAUNCH_FORBIDDEN.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            yield f"{path}:{line}: includes <{m.group(1)}/...>: launch/ is torch-free and Slurm-header-free"


def strip_code(text):
    """Comments, strings, character literals and preprocessor lines blanked
    (newlines kept)."""
    text = re.sub(r"(?m)^[ \t]*#.*(?:\\\n.*)*", lambda m: "\n" * m.group(0).count("\n"), text)
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == 'R' and text.startswith('R"', i) and (i == 0 or not (text[i-1].isalnum() or text[i-1] == '_')):
            k = text.find("(", i)
            delim = ")" + text[i + 2:k] + '"'
            j = text.find(delim, k)
            j = n if j < 0 else j + len(delim)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # digit separator 1'000
                out.append(c)
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


NOT_FUNCTION = re.compile(r"^\s*(namespace|class|struct|union|enum|extern)\b|=\s*$|\b(if|for|while|switch|catch|do|else|return)\b")


def functions(text):
    """(name, first line, last line) of every outermost function body."""
    code = strip_code(text)
    depth_kinds = []  # 'f' function body, 's' scope (namespace/class), 'o' other
    last_stop = 0
    start_line = {}
    i = 0
    for i, c in enumerate(code):
        if c in ";":
            last_stop = i + 1
        elif c == "{":
            head = code[last_stop:i]
            inside_function = "f" in depth_kinds
            kind = "o"
            if not inside_function:
                h = " ".join(head.split())
                if "(" in h and not NOT_FUNCTION.search(h) and not h.endswith(("]", "=")):
                    kind = "f"
                elif re.search(r"\b(namespace|class|struct|union)\b", h) or h.startswith('extern'):
                    kind = "s"
            depth_kinds.append(kind)
            if kind == "f":
                name = re.findall(r"([~\w:]+)\s*\(", head)
                start_line[len(depth_kinds)] = (name[0] if name else "?",
                                                code.count("\n", 0, last_stop) + 1 +
                                                len(head) - len(head.lstrip("\n")) - head[:len(head) - len(head.lstrip())].count(" ") * 0)
            last_stop = i + 1
        elif c == "}":
            if depth_kinds:
                kind = depth_kinds.pop()
                if kind == "f":
                    name, first = start_line.pop(len(depth_kinds) + 1)
                    head_first = first
                    yield name, head_first, code.count("\n", 0, i) + 1
            last_stop = i + 1


# The names StateLayout (job/state_layout.cc) spells under the state
# directory and in a job's folder: a path component equal to one of NAMES, or
# starting with one of PREFIXES, is a path StateLayout must build.
STATE_NAMES = {"jobs", "verdicts", "attic", "outbox", "unstored", "grants", "config.toml",
               "lock.json", "runner.started", "results.json", "metrics", "work", "nodes"}
STATE_PREFIXES = ("checkpoint-files-",)
# Names a folder may spell for files of its own that StateLayout also names
# (rule_paths says why).
PATH_EXEMPT = {"runner": {"results.json"}}
LITERAL = re.compile(r'(?<![\w\'])"((?:[^"\\\n]|\\.)*)"')


def string_literals(text):
    """(line, literal, the code before it, the code after it) of every
    ordinary string literal outside comments."""
    code = re.sub(r"//[^\n]*", lambda m: " " * len(m.group(0)), text)
    code = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), code, flags=re.S)
    code = re.sub(r"(?m)^[ \t]*#[ \t]*include.*", "", code)
    code = re.sub(r'\bR"([^(\s]*)\(.*?\)\1"', lambda m: re.sub(r"[^\n]", " ", m.group(0)), code,
                  flags=re.S)
    for m in LITERAL.finditer(code):
        before = code[:m.start()].rstrip()[-1:]
        after = code[m.end():].lstrip()[:1]
        yield code.count("\n", 0, m.start()) + 1, m.group(1), before, after


def state_name_in(literal):
    """The StateLayout name a literal spells as a path, or None. A literal
    with white space is prose (a message naming a file), not a path; one
    with a '/' is a path; a bare name is one when it is joined with '+'."""
    if not literal or any(c.isspace() for c in literal):
        return None
    for part in literal.split("/"):
        if part in STATE_NAMES or part.startswith(STATE_PREFIXES):
            return part
    return None


def rule_paths(root):
    """Every path under the state directory is spelled in job/state_layout.h
    (StateLayout) and nowhere else. In the C++ sources of core/, runner/ and
    the Slurm-side executables, a string literal is a breach when it spells
    one of STATE_NAMES (or a name starting with one of STATE_PREFIXES) as a
    path component: a literal holding a '/' ("/lock.json", "jobs/"), or a
    bare name joined with '+' (dir + "/" + "results.json"). A literal with
    white space is prose, a message naming a file ("results.json is
    invalid"), and a bare name passed on its own is a label in messages
    (ParseLock's "lock.json"); neither is a path. Comments and #include
    lines are not read; tests/ builds its fixtures' paths as it likes.

    runner/ is exempt for results.json only. It never learns the state
    directory: every path it uses comes on its command line. It writes into
    its own --out folder (the job's work folder, or a user's --pilot-out):
    results.json there, which StateLayout::ResultsIn names for the
    Slurm-side parts and which runner/ cannot take from job/ (it uses core/
    only); its other files there (metrics.jsonl, resume.json, the ranks'
    reports, checkpoints) are no names of StateLayout's, so every other name
    is a breach in runner/ as anywhere.
    """
    for top in ["core", "launch", "runner"] + EXECUTABLES:
        exempt = PATH_EXEMPT.get(top, set())
        for path in sources(root, top):
            with open(os.path.join(root, path), encoding="utf-8") as f:
                text = f.read()
            for line, lit, before, after in string_literals(text):
                name = state_name_in(lit)
                if name is None or name in exempt:
                    continue
                if "/" not in lit and before != "+" and after != "+":
                    continue
                yield f'{path}:{line}: "{lit}" spells {name}: paths under the state ' \
                      f"directory are StateLayout's (job/state_layout.h)"


EXIT_HOME = "core/records/exit_codes.h"
EXIT_DEFINITION = re.compile(r"\b(?:constexpr|const|#\s*define)\b[^;\n]*\bkExit\w*\b\s*=?|\bkExit\w*\s*=\s*\d")


def rule_exits(root):
    """pilot-runner's exit statuses are one enum, ExitCode in EXIT_HOME: any
    other definition of a kExit* constant (constexpr, const, #define, an
    enumerator) is a second spelling of the same contract. cli/ is not read:
    `pilot` has exit statuses of its own (cli/commands.h, pilot(1)), which
    are another program's contract."""
    for top in ["core", "launch", "job", "runner"] + [e for e in EXECUTABLES if e != "cli"]:
        for path in sources(root, top):
            if path == EXIT_HOME:
                continue
            with open(os.path.join(root, path), encoding="utf-8") as f:
                text = f.read()
            for m in EXIT_DEFINITION.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                yield f"{path}:{line}: defines {m.group(0).strip()}: exit statuses are {EXIT_HOME}'s"


def rule_functions(root):
    for top in ["core", "launch", "job", "runner", "supervisor", "spank_plugin", "prolog", "epilog",
                "cli"]:
        for path in sources(root, top):
            with open(os.path.join(root, path), encoding="utf-8") as f:
                text = f.read()
            for name, first, last in functions(text):
                # The signature's first line is where the text after the last
                # statement starts; count from the line of the name.
                n = last - first + 1
                if n > MAX_FUNCTION_LINES:
                    yield f"{path}:{first}: {name} is {n} lines (at most {MAX_FUNCTION_LINES})"


CLASS_HEAD = re.compile(r"\b(class|struct)\s+(\w+)[^;{()]*$")


def classes(text):
    """(name, first line, last line) of every class or struct definition."""
    code = strip_code(text)
    stack = []  # (name, first line) of a class, None for other braces
    last_stop = 0
    for i, c in enumerate(code):
        if c in ";":
            last_stop = i + 1
        elif c == "{":
            head = " ".join(code[last_stop:i].split())
            m = CLASS_HEAD.search(head)
            stack.append((m.group(2), code.count("\n", 0, i) + 1) if m and "enum" not in head else None)
            last_stop = i + 1
        elif c == "}":
            if stack:
                top = stack.pop()
                if top is not None:
                    yield top[0], top[1], code.count("\n", 0, i) + 1
            last_stop = i + 1


def rule_sizes(root):
    paths = [p for top in CODE_TOPS for p in sources(root, top)]
    paths += [os.path.relpath(os.path.join(d, f), root)
              for d, _, files in os.walk(os.path.join(root, "python")) for f in sorted(files)
              if f.endswith(".py")]
    for path in paths:
        with open(os.path.join(root, path), encoding="utf-8") as f:
            text = f.read()
        lines = text.count("\n")
        if lines > MAX_FILE_LINES:
            yield f"{path}:1: {lines} lines (at most {MAX_FILE_LINES}): split it by concern"
        if not path.endswith((".cc", ".h", ".cu")):
            continue
        for name, first, last in classes(text):
            n = last - first + 1
            if n > MAX_CLASS_LINES:
                yield f"{path}:{first}: class {name} is {n} lines (at most {MAX_CLASS_LINES})"


RULES = {"rooms": rule_rooms, "runner": rule_runner, "executables": rule_executables,
         "launch": rule_launch, "functions": rule_functions, "sizes": rule_sizes, "paths": rule_paths,
         "exits": rule_exits}


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = argv[1]
    names = argv[2:] or list(RULES)
    bad = 0
    for name in names:
        if name not in RULES:
            print(f"pilot: structure: unknown rule {name} (rules: {', '.join(RULES)})", file=sys.stderr)
            return 2
        for breach in RULES[name](root):
            print(f"pilot: structure: {name}: {breach}")
            bad += 1
    if bad:
        print(f"pilot: structure: {bad} breach(es)")
        return 1
    print(f"pilot: structure: {', '.join(names)}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
