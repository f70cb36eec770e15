# bash completion for memvault: generated from the CLI by `python -m memvault.cli.docs_gen`; do not edit

_memvault_fact_ids() (
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
)

_memvault() {
    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"
    local path="" i word
    # The command path: words naming a known sub-command of the path so far.
    for ((i = 1; i < COMP_CWORD; i++)); do
        word="${COMP_WORDS[i]}"
        case "${path:+$path }$word" in
            "init"|"add"|"show"|"recent"|"history"|"forget"|"purge"|"import"|"search"|"reindex"|"context"|"sessions"|"completions"|"why"|"dream"|"status"|"doctor"|"sync"|"clone"|"mcp"|"install"|"uninstall"|"remote"|"remote set"|"remote show") path="${path:+$path }$word" ;;
        esac
    done
    case "$path:$prev" in
        ":--vault") COMPREPLY=(); return ;;
        "add:--category"|"add:-c") COMPREPLY=($(compgen -W "fact preference correction entity decision relationship principle commitment moment skill event" -- "$cur")); return ;;
        "add:--tag"|"add:-t") COMPREPLY=(); return ;;
        "add:--source") COMPREPLY=(); return ;;
        "add:--session") COMPREPLY=(); return ;;
        "add:--importance") COMPREPLY=(); return ;;
        "add:--at") COMPREPLY=(); return ;;
        "add:--supersedes") COMPREPLY=(); return ;;
        "add:--key") COMPREPLY=(); return ;;
        "add:--vault") COMPREPLY=(); return ;;
        "show:--as-of") COMPREPLY=(); return ;;
        "show:--vault") COMPREPLY=(); return ;;
        "recent:--limit"|"recent:-n") COMPREPLY=(); return ;;
        "recent:--since") COMPREPLY=(); return ;;
        "recent:--until") COMPREPLY=(); return ;;
        "recent:--category"|"recent:-c") COMPREPLY=($(compgen -W "fact preference correction entity decision relationship principle commitment moment skill event" -- "$cur")); return ;;
        "recent:--tag"|"recent:-t") COMPREPLY=(); return ;;
        "recent:--source") COMPREPLY=(); return ;;
        "recent:--session") COMPREPLY=(); return ;;
        "recent:--as-of") COMPREPLY=(); return ;;
        "recent:--vault") COMPREPLY=(); return ;;
        "history:--vault") COMPREPLY=(); return ;;
        "forget:--reason"|"forget:-r") COMPREPLY=(); return ;;
        "forget:--vault") COMPREPLY=(); return ;;
        "purge:--vault") COMPREPLY=(); return ;;
        "import:--format"|"import:-f") COMPREPLY=(); return ;;
        "import:--vault") COMPREPLY=(); return ;;
        "search:--limit"|"search:-n") COMPREPLY=(); return ;;
        "search:--category"|"search:-c") COMPREPLY=($(compgen -W "fact preference correction entity decision relationship principle commitment moment skill event" -- "$cur")); return ;;
        "search:--tag"|"search:-t") COMPREPLY=(); return ;;
        "search:--source") COMPREPLY=(); return ;;
        "search:--session") COMPREPLY=(); return ;;
        "search:--since") COMPREPLY=(); return ;;
        "search:--until") COMPREPLY=(); return ;;
        "search:--min-score") COMPREPLY=(); return ;;
        "search:--as-of") COMPREPLY=(); return ;;
        "search:--vault") COMPREPLY=(); return ;;
        "reindex:--vault") COMPREPLY=(); return ;;
        "context:--budget"|"context:-b") COMPREPLY=(); return ;;
        "context:--recent") COMPREPLY=(); return ;;
        "context:--relevant") COMPREPLY=(); return ;;
        "context:--as-of") COMPREPLY=(); return ;;
        "context:--vault") COMPREPLY=(); return ;;
        "sessions:--since") COMPREPLY=(); return ;;
        "sessions:--until") COMPREPLY=(); return ;;
        "sessions:--source") COMPREPLY=(); return ;;
        "sessions:--vault") COMPREPLY=(); return ;;
        "why:--vault") COMPREPLY=(); return ;;
        "dream:--max-batches") COMPREPLY=(); return ;;
        "dream:--min-facts") COMPREPLY=(); return ;;
        "dream:--model") COMPREPLY=(); return ;;
        "dream:--vault") COMPREPLY=(); return ;;
        "status:--as-of") COMPREPLY=(); return ;;
        "status:--vault") COMPREPLY=(); return ;;
        "doctor:--vault") COMPREPLY=(); return ;;
        "sync:--vault") COMPREPLY=(); return ;;
        "mcp:--port") COMPREPLY=(); return ;;
        "mcp:--vault") COMPREPLY=(); return ;;
        "install:--budget") COMPREPLY=(); return ;;
        "install:--vault") COMPREPLY=(); return ;;
        "remote:--vault") COMPREPLY=(); return ;;
        "remote set:--vault") COMPREPLY=(); return ;;
        "remote show:--vault") COMPREPLY=(); return ;;
    esac
    case "$path" in
        "") COMPREPLY=($(compgen -W "--version --vault --help init add show recent history forget purge import search reindex context sessions completions why dream status doctor sync clone mcp install uninstall remote" -- "$cur")) ;;
        "init") COMPREPLY=($(compgen -W "--adopt --json --help" -- "$cur")) ;;
        "add") COMPREPLY=($(compgen -W "--category --tag --source --session --importance --at --stdin --allow-secret --supersedes --key --json --vault --help" -- "$cur")) ;;
        "show") [[ "$cur" != -* ]] && { COMPREPLY=($(compgen -W "$(_memvault_fact_ids "${COMP_WORDS[@]}" | cut -d " " -f 1)" -- "$cur")); return; }; COMPREPLY=($(compgen -W "--as-of --json --vault --help" -- "$cur")) ;;
        "recent") COMPREPLY=($(compgen -W "--limit --since --until --category --tag --source --session --oldest-first --newest-first --as-of --full --json --vault --help" -- "$cur")) ;;
        "history") [[ "$cur" != -* ]] && { COMPREPLY=($(compgen -W "$(_memvault_fact_ids "${COMP_WORDS[@]}" | cut -d " " -f 1)" -- "$cur")); return; }; COMPREPLY=($(compgen -W "--json --vault --help" -- "$cur")) ;;
        "forget") [[ "$cur" != -* ]] && { COMPREPLY=($(compgen -W "$(_memvault_fact_ids "${COMP_WORDS[@]}" | cut -d " " -f 1)" -- "$cur")); return; }; COMPREPLY=($(compgen -W "--reason --json --vault --help" -- "$cur")) ;;
        "purge") COMPREPLY=($(compgen -W "--yes --json --vault --help" -- "$cur")) ;;
        "import") COMPREPLY=($(compgen -W "--format --dry-run --allow-secret --skip-secrets --json --vault --help" -- "$cur")) ;;
        "search") COMPREPLY=($(compgen -W "--limit --category --tag --source --session --since --until --all --lexical --explain --min-score --no-rerank --as-of --full --stdin --json --vault --help" -- "$cur")) ;;
        "reindex") COMPREPLY=($(compgen -W "--clear --download-model --json --vault --help" -- "$cur")) ;;
        "context") COMPREPLY=($(compgen -W "--budget --recent --relevant --markdown --as-of --json --vault --help" -- "$cur")) ;;
        "sessions") COMPREPLY=($(compgen -W "--since --until --source --json --vault --help" -- "$cur")) ;;
        "completions") [[ "$cur" != -* ]] && { COMPREPLY=($(compgen -W "bash zsh fish" -- "$cur")); return; }; COMPREPLY=($(compgen -W "--json --help" -- "$cur")) ;;
        "why") COMPREPLY=($(compgen -W "--json --vault --help" -- "$cur")) ;;
        "dream") COMPREPLY=($(compgen -W "--dry-run --max-batches --min-facts --model --undo --status --json --vault --help" -- "$cur")) ;;
        "status") COMPREPLY=($(compgen -W "--as-of --json --vault --help" -- "$cur")) ;;
        "doctor") COMPREPLY=($(compgen -W "--fix --llm --full --json --vault --help" -- "$cur")) ;;
        "sync") COMPREPLY=($(compgen -W "--json --vault --help" -- "$cur")) ;;
        "clone") COMPREPLY=($(compgen -W "--json --help" -- "$cur")) ;;
        "mcp") COMPREPLY=($(compgen -W "--http --port --vault --help" -- "$cur")) ;;
        "install") COMPREPLY=($(compgen -W "--dry-run --hook --no-hook --budget --json --vault --help" -- "$cur")) ;;
        "uninstall") COMPREPLY=($(compgen -W "--dry-run --json --help" -- "$cur")) ;;
        "remote") COMPREPLY=($(compgen -W "--json --vault --help set show" -- "$cur")) ;;
        "remote set") COMPREPLY=($(compgen -W "--json --vault --help" -- "$cur")) ;;
        "remote show") COMPREPLY=($(compgen -W "--json --vault --help" -- "$cur")) ;;
    esac
}

complete -o default -F _memvault memvault
