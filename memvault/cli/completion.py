"""Static shell completion scripts, generated from the command tree.

Static rather than click's call-back scripts: a TAB press must not start Python and import
memvault. The price is that the scripts go stale when commands change, so they are generated
(`python -m memvault.cli.docs_gen`) and a test compares them with the CLI.

Fact ids (any argument named ID: show, forget, history) are completed without Python too: a POSIX
sh function (FACT_IDS_SH), shared by the three shells, finds the vault the way memvault does and
reads the ids and first lines of the recently changed daily logs, newest first, forgotten ones
left out. It reads at most 31 log files, so a TAB stays quick in a vault of any size.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

SHELLS = ("bash", "zsh", "fish")
PROG = "memvault"
HEADER = "generated from the CLI by `python -m memvault.cli.docs_gen`; do not edit"


@dataclass
class Param:
    names: list[str]  # option spellings (--category, -c) or [metavar] for an argument
    help: str
    takes_value: bool
    choices: list[str]
    kind: str  # "choice" | "dir" | "file" | "text" | "flag" | "fact_id"
    many: bool = False  # an argument that takes any number of values


@dataclass
class Node:
    path: list[str]  # command words after the program name
    help: str
    options: list[Param] = field(default_factory=list)
    arguments: list[Param] = field(default_factory=list)
    children: list[Node] = field(default_factory=list)


def command_tree(root) -> Node:
    """The tree of the root click command (`typer.main.get_command(app)`)."""
    return _node(root, [])


def _node(command, path: list[str]) -> Node:
    from typer import Context

    node = Node(path=path, help=first_sentence(command.help or ""))
    for param in command.params:
        if getattr(param, "hidden", False):
            continue
        if param.param_type_name == "argument":
            node.arguments.append(Param([argument_name(param)], _argument_help(param), True,
                                        _choices(param), _kind(param), many=param.nargs == -1))
        else:
            names = [*param.opts, *param.secondary_opts]
            flag = bool(param.is_flag or param.count)
            node.options.append(Param(names, first_sentence(param.help or ""), not flag, _choices(param),
                                      "flag" if flag else _kind(param)))
    node.options.append(Param(["--help", "-h"], "Show help and exit", False, [], "flag"))
    if hasattr(command, "list_commands"):
        ctx = Context(command, info_name=PROG)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not getattr(sub, "hidden", False):
                node.children.append(_node(sub, [*path, name]))
    return node


def argument_name(param) -> str:
    return param.metavar or param.name.upper()


def _argument_help(param) -> str:
    return first_sentence(getattr(param, "help", None) or argument_name(param))


def _annotation(param):
    return getattr(getattr(param, "type_descriptor", None), "annotation", None)


def _choices(param) -> list[str]:
    import enum
    import typing

    from memvault.base.config import CATEGORIES

    annotation = _annotation(param)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return [str(member.value) for member in annotation]
    if typing.get_origin(annotation) is typing.Literal:
        return [str(value) for value in typing.get_args(annotation)]
    # Values the CLI checks itself (free-form str options whose domain is known).
    if param.name == "category":
        return list(CATEGORIES)
    if param.name == "shell":
        return list(SHELLS)
    return []


def _kind(param) -> str:
    if _choices(param):
        return "choice"
    if param.param_type_name == "argument" and argument_name(param) == "ID":
        return "fact_id"
    from pathlib import Path

    annotation = _annotation(param)
    if isinstance(annotation, type) and issubclass(annotation, Path):
        return "dir" if param.name in ("vault_path", "path") else "file"
    return "text"


def first_sentence(text: str) -> str:
    text = " ".join(text.split("\n\n", 1)[0].split())
    match = re.match(r"(.+?[.!?])(\s|$)", text)
    return (match.group(1) if match else text).rstrip(".")


def walk(node: Node):
    yield node
    for child in node.children:
        yield from walk(child)


def completion_script(shell: str, root) -> str:
    tree = command_tree(root)
    return {"bash": _bash, "zsh": _zsh, "fish": _fish}[shell](tree)


# Prints "<id> <first line>" for the recent facts of the vault the words on the command line
# (its arguments) point to: --vault, else MEMVAULT_VAULT, else the enclosing vault, else the
# default vault. A subshell body, so the `cd` stays inside.
FACT_IDS_SH = r"""_memvault_fact_ids() (
    vault= want=
    for word in "$@"; do
        case $word in
            --vault) want=1 ;;
            --vault=*) vault=${word#--vault=} want= ;;
            =) ;;
            *) if [ -n "$want" ]; then vault=$word want=; fi ;;
        esac
    done
    case $vault in "~" | "~/"*) vault=$HOME${vault#"~"} ;; esac
    [ -n "$vault" ] || vault=$MEMVAULT_VAULT
    if [ -z "$vault" ]; then
        dir=$PWD
        while [ -n "$dir" ]; do
            if [ -f "$dir/memvault.toml" ] && [ -e "$dir/.git" ]; then vault=$dir; break; fi
            [ "$dir" = / ] && break
            dir=$(dirname -- "$dir")
        done
    fi
    if [ -z "$vault" ]; then
        case $(uname -s) in
            Darwin) vault="$HOME/Library/Application Support/memvault/vault" ;;
            *) vault="${XDG_DATA_HOME:-$HOME/.local/share}/memvault/vault" ;;
        esac
    fi
    cd -- "$vault" 2>/dev/null || exit 0
    gone=$(sed -n 's/.*"id": *"\([0-9a-z]*\)".*/\1/p' tombstones.jsonl 2>/dev/null | tr '\n' ' ')
    ls -t logs/*/*.md 2>/dev/null | head -n 31 |
        xargs sed -n 's/^- \(.*\) <!-- mv {"id":"\([0-9a-hjkmnp-tv-z]\{16\}\)".*/\2 \1/p' /dev/null 2>/dev/null |
        LC_ALL=C sort -r |
        awk -v gone="$gone" 'BEGIN { n = split(gone, g, " "); for (i = 1; i <= n; i++) skip[g[i]] = 1 }
            !(substr($0, 1, 16) in skip) && shown++ < 50 { print substr($0, 1, 100) }'
)"""


# -- bash ----------------------------------------------------------------------------------------

def _bash(tree: Node) -> str:
    nodes = list(walk(tree))
    key = lambda n: " ".join(n.path)  # noqa: E731
    out = [f"# bash completion for {PROG}: {HEADER}", "", FACT_IDS_SH, "", f"_{PROG}() {{",
           '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"',
           '    local path="" i word',
           "    # The command path: words naming a known sub-command of the path so far.",
           "    for ((i = 1; i < COMP_CWORD; i++)); do",
           '        word="${COMP_WORDS[i]}"',
           '        case "${path:+$path }$word" in']
    subpaths = [key(n) for n in nodes if n.path]
    if subpaths:
        out.append("            " + "|".join(f'"{p}"' for p in subpaths) + ') path="${path:+$path }$word" ;;')
    out += ["        esac", "    done", '    case "$path:$prev" in']
    for node in nodes:
        for option in node.options:
            if not option.takes_value:
                continue
            pattern = "|".join(f'"{key(node)}:{name}"' for name in option.names)
            out.append(f"        {pattern}) {_bash_values(option)}; return ;;")
    out += ["    esac", '    case "$path" in']
    for node in nodes:
        words = [name for option in node.options for name in option.names if name.startswith("--")]
        words += [child.path[-1] for child in node.children]
        argument = next((a for a in node.arguments if a.kind in ("choice", "fact_id")), None)
        line = f'        "{key(node)}") '
        if argument is not None:
            line += f'[[ "$cur" != -* ]] && {{ {_bash_values(argument)}; return; }}; '
        out.append(line + f'COMPREPLY=($(compgen -W "{" ".join(words)}" -- "$cur")) ;;')
    out += ["    esac", "}", "", f"complete -o default -F _{PROG} {PROG}", ""]
    return "\n".join(out)


def _bash_values(param: Param) -> str:
    if param.kind == "choice":
        return f'COMPREPLY=($(compgen -W "{" ".join(param.choices)}" -- "$cur"))'
    if param.kind == "dir":
        return 'COMPREPLY=($(compgen -d -- "$cur"))'
    if param.kind == "file":
        return 'COMPREPLY=($(compgen -f -- "$cur"))'
    if param.kind == "fact_id":
        return 'COMPREPLY=($(compgen -W "$(_memvault_fact_ids "${COMP_WORDS[@]}" | cut -d " " -f 1)" -- "$cur"))'
    return "COMPREPLY=()"


# -- zsh -----------------------------------------------------------------------------------------

def _zsh(tree: Node) -> str:
    # The shared sh function, run in sh emulation; its "<id> <text>" lines become id:description.
    fact_ids = FACT_IDS_SH.replace("() (\n", "() (\n    emulate -L sh\n", 1)
    out = [f"#compdef {PROG}", f"# zsh completion for {PROG}: {HEADER}", "", fact_ids, "",
           f"_{PROG}_fact_id() {{", "    local -a ids",
           '    ids=(${(f)"$(_memvault_fact_ids ${(Q)${(z)BUFFER}})"})',
           "    ids=(${ids/ /:})",
           "    _describe -t fact-ids 'fact id' ids", "}", ""]
    for node in reversed(list(walk(tree))):  # define helpers before the functions that call them
        name = "_" + "_".join([PROG, *node.path]).replace("-", "_")
        specs = [_zsh_option(o) for o in node.options]
        out.append(f"{name}() {{")
        if node.children:
            out += ["    local curcontext=\"$curcontext\" state line", "    typeset -A opt_args",
                    "    _arguments -C \\"]
            out += [f"        {spec} \\" for spec in specs]
            out += ["        '1: :->command' \\", "        '*:: :->args'", "    case $state in", "        command)",
                    "            local -a commands", "            commands=("]
            out += [f"                {_zsh_quote(c.path[-1] + ':' + c.help)}" for c in node.children]
            out += ["            )", "            _describe -t commands 'command' commands ;;", "        args)",
                    "            case $line[1] in"]
            for child in node.children:
                child_name = "_" + "_".join([PROG, *child.path]).replace("-", "_")
                out.append(f"                {child.path[-1]}) {child_name} ;;")
            out += ["            esac ;;", "    esac"]
        else:
            specs += [_zsh_argument(i, a) for i, a in enumerate(node.arguments, start=1)]
            out.append("    _arguments \\")
            out += [f"        {spec} \\" for spec in specs[:-1]] + [f"        {specs[-1]}"]
        out += ["}", ""]
    out += [f'_{PROG} "$@"', ""]
    return "\n".join(out)


def _zsh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _zsh_help(text: str) -> str:
    return text.replace("[", "(").replace("]", ")").replace(":", " -")


def _zsh_action(param: Param) -> str:
    if param.kind == "choice":
        return f"({' '.join(param.choices)})"
    return {"dir": "_files -/", "file": "_files", "fact_id": f"_{PROG}_fact_id"}.get(param.kind, " ")


def _zsh_option(option: Param) -> str:
    names = option.names
    exclusive = f"({' '.join(names)})" if len(names) > 1 else ""
    spelled = "{" + ",".join(names) + "}" if len(names) > 1 else names[0]
    value = f":{option.names[0].lstrip('-')}:{_zsh_action(option)}" if option.takes_value else ""
    body = f"[{_zsh_help(option.help)}]{value}"
    if len(names) > 1:
        return _zsh_quote(exclusive) + spelled + _zsh_quote(body)
    return _zsh_quote(spelled + body)


def _zsh_argument(position: int, argument: Param) -> str:
    where = "*" if argument.many else str(position)
    return _zsh_quote(f"{where}:{_zsh_help(argument.help)}:{_zsh_action(argument)}")


# -- fish ----------------------------------------------------------------------------------------

def _fish(tree: Node) -> str:
    # fish runs the shared sh function with the words typed so far; "<id> <text>" -> id<TAB>text.
    fish_ids = f"{FACT_IDS_SH}\n_memvault_fact_ids \"$@\""
    out = [f"# fish completion for {PROG}: {HEADER}", "", f"function __{PROG}_fact_ids",
           f"    sh -c {_fish_quote(fish_ids)} sh (commandline -opc) | string replace ' ' \\t", "end", "",
           f"complete -c {PROG} -f"]
    for node in walk(tree):
        below = " ".join(c.path[-1] for c in node.children)
        if node.path:
            condition = " && ".join(f"__fish_seen_subcommand_from {word}" for word in node.path)
            if below:
                condition += f" && not __fish_seen_subcommand_from {below}"
        else:
            condition = "__fish_use_subcommand" if below else "true"
        quoted = _fish_quote(condition)
        for child in node.children:
            out.append(f"complete -c {PROG} -n {quoted} -a {child.path[-1]} -d {_fish_quote(child.help)}")
        for option in node.options:
            spelled = " ".join(f"-l {n[2:]}" if n.startswith("--") else f"-s {n[1:]}" for n in option.names)
            out.append(f"complete -c {PROG} -n {quoted} {spelled}{_fish_values(option)} "
                       f"-d {_fish_quote(option.help)}")
        for argument in node.arguments:
            if argument.kind == "choice":
                out.append(f"complete -c {PROG} -n {quoted} -a {_fish_quote(' '.join(argument.choices))}")
            elif argument.kind in ("dir", "file"):
                out.append(f"complete -c {PROG} -n {quoted} -F")
            elif argument.kind == "fact_id":
                out.append(f"complete -c {PROG} -n {quoted} -a '(__{PROG}_fact_ids)'")
    out.append("")
    return "\n".join(out)


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _fish_values(param: Param) -> str:
    if not param.takes_value:
        return ""
    if param.kind == "choice":
        return f" -x -a {_fish_quote(' '.join(param.choices))}"
    if param.kind == "dir":
        return " -x -a '(__fish_complete_directories)'"
    if param.kind == "file":
        return " -r -F"
    return " -x"
