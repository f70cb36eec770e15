# fish completion for memvault: generated from the CLI by `python -m memvault.cli.docs_gen`; do not edit

function __memvault_fact_ids
    sh -c '_memvault_fact_ids() (
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
    gone=$(sed -n \'s/.*"id": *"\\([0-9a-z]*\\)".*/\\1/p\' tombstones.jsonl 2>/dev/null | tr \'\\n\' \' \')
    ls -t logs/*/*.md 2>/dev/null | head -n 31 |
        xargs sed -n \'s/^- \\(.*\\) <!-- mv {"id":"\\([0-9a-hjkmnp-tv-z]\\{16\\}\\)".*/\\2 \\1/p\' /dev/null 2>/dev/null |
        LC_ALL=C sort -r |
        awk -v gone="$gone" \'BEGIN { n = split(gone, g, " "); for (i = 1; i <= n; i++) skip[g[i]] = 1 }
            !(substr($0, 1, 16) in skip) && shown++ < 50 { print substr($0, 1, 100) }\'
)
_memvault_fact_ids "$@"' sh (commandline -opc) | string replace ' ' \t
end

complete -c memvault -f
complete -c memvault -n '__fish_use_subcommand' -a init -d 'Create a vault: template files, its own git repository, and a first commit'
complete -c memvault -n '__fish_use_subcommand' -a add -d 'Remember a fact: append it to its day\'s log and commit'
complete -c memvault -n '__fish_use_subcommand' -a show -d 'Show one fact with all its fields'
complete -c memvault -n '__fish_use_subcommand' -a recent -d 'List the newest facts'
complete -c memvault -n '__fish_use_subcommand' -a history -d 'The git commits that touched a fact: when it was added, edited, consolidated, forgotten'
complete -c memvault -n '__fish_use_subcommand' -a forget -d 'Forget a fact: a committed tombstone hides it from listing, search and dream for good'
complete -c memvault -n '__fish_use_subcommand' -a purge -d 'Remove facts\' text from the logs and from every commit of the history, for good'
complete -c memvault -n '__fish_use_subcommand' -a search -d 'Find facts and wiki sections by their words and their meaning, newest-aware'
complete -c memvault -n '__fish_use_subcommand' -a reindex -d 'Bring the search index up to date with the vault files, or rebuild it with --clear'
complete -c memvault -n '__fish_use_subcommand' -a context -d 'Print a ready-to-paste memory bundle for a prompt, never over the token budget'
complete -c memvault -n '__fish_use_subcommand' -a sessions -d 'List the sources and sessions facts came from, with fact counts and first/last times'
complete -c memvault -n '__fish_use_subcommand' -a completions -d 'Print the shell completion script (the same file as completions/ in the source tree)'
complete -c memvault -n '__fish_use_subcommand' -a dream -d 'Consolidate pending daily logs into wiki pages, index.md and MEMORY.md with an LLM'
complete -c memvault -n '__fish_use_subcommand' -a status -d 'Where the vault stands: facts, days, pages, dream progress, search index, remote, lock'
complete -c memvault -n '__fish_use_subcommand' -a doctor -d 'Check the vault\'s health and explain each problem; exits 1 when a check fails'
complete -c memvault -n '__fish_use_subcommand' -a sync -d 'Fetch the remote, merge its commits with this vault\'s, push'
complete -c memvault -n '__fish_use_subcommand' -a clone -d 'Set up a vault on this machine from a remote, ready to `memvault sync`'
complete -c memvault -n '__fish_use_subcommand' -a mcp -d 'Run an MCP server for agents (Claude Code, Claude Desktop, Cursor) on stdin/stdout'
complete -c memvault -n '__fish_use_subcommand' -a remote -d 'The git remote this vault syncs with; alone, the same as `remote show`'
complete -c memvault -n '__fish_use_subcommand' -l version -d 'Print the version and exit'
complete -c memvault -n '__fish_use_subcommand' -l vault -x -d 'Vault directory for the command (its own --vault wins)'
complete -c memvault -n '__fish_use_subcommand' -l help -s h -d 'Show help and exit'
complete -c memvault -n '__fish_seen_subcommand_from init' -l adopt -d 'Re-create the git repository of a vault whose .git is missing or broken, from its files, in one commit'
complete -c memvault -n '__fish_seen_subcommand_from init' -l json -d 'Print one JSON document on stdout'
complete -c memvault -n '__fish_seen_subcommand_from init' -l help -s h -d 'Show help and exit'
complete -c memvault -n '__fish_seen_subcommand_from add' -l category -s c -x -a 'fact preference correction entity decision relationship principle commitment moment skill event' -d 'fact, preference, correction, entity, decision, relationship, principle, commitment, moment, skill or event'
complete -c memvault -n '__fish_seen_subcommand_from add' -l tag -s t -x -d 'A tag (repeatable; one given twice is kept once)'
complete -c memvault -n '__fish_seen_subcommand_from add' -l source -x -d 'Who or what said it: agent or session id'
complete -c memvault -n '__fish_seen_subcommand_from add' -l session -x -d 'Conversation or session id, for threading'
complete -c memvault -n '__fish_seen_subcommand_from add' -l importance -x -d '0..1; raises the fact in search and MEMORY.md'
complete -c memvault -n '__fish_seen_subcommand_from add' -l at -x -d 'When it happened: ISO 8601 date or datetime, or yesterday, 3d, 12h; backdates into that day\'s log'
complete -c memvault -n '__fish_seen_subcommand_from add' -l stdin -d 'Read one fact per line (plain text or a JSON object); one commit'
complete -c memvault -n '__fish_seen_subcommand_from add' -l allow-secret -d 'Store a text holding a credential (a key, token, password) anyway; it is never sent to an LLM'
complete -c memvault -n '__fish_seen_subcommand_from add' -l json -d 'Print one JSON document on stdout'
complete -c memvault -n '__fish_seen_subcommand_from add' -l vault -x -d 'Vault directory (default: MEMVAULT_VAULT, else the enclosing vault, else the default vault); also accepted before the command'
complete -c memvault -n '__fish_seen_subcommand_from add' -l help -s h -d 'Show help and exit'
complete -c memvault -n '__fish_seen_subcommand_from show' -l json -d 'Print one JSON document on stdout'
complete -c memvault -n '__fish_seen_subcommand_from show' -l vault -x -d 'Vault directory (default: MEMVAULT_VAULT, else the enclosing vault, else the default vault); also accepted before the command'
complete -c memvault -n '__fish_seen_subcommand_from show' -l help -s h -d 'Show help and exit'
complete -c memvault -n '__fish_seen_subcommand_from show' -a '(__memvault_fact_ids)'
complete -c memvault -n '__fish_seen_subcommand_from recent' -l limit -s n -x -d 'How many facts at most (at least 1)'
complete -c memvault -n '__fish_seen_subcommand_from recent' -l since -x -d 'From this time on: 2026-11-01, yesterday, 7d, 12h'
complete -c memvault -n '__fish_seen_subcommand_from recent' -l until -x -d 'Up to this time (a date includes the whole day)'
complete -c memvault -n '__fish_seen_subcommand_from recent' -l category -s c -x -a 'fact preference correction entity decision relationship principle commitment moment skill event' -d 'Only facts of this category'
complete -c memvault -n '__fish_seen_subcommand_from recent' -l tag -s t -x -d 'Only facts with this tag'
complete -c memvault -n '__fish_seen_subcommand_from recent' -l source -x -d 'Only facts from this source'
complete -c memvault -n '__fish_seen_subcommand_from recent' -l session -x -d 'Only facts from this session'
complete -c memvault -n '__fish_seen_subcommand_from recent' -l oldest-first -l newest-first -d 'Order of the listed facts (default: oldest first with --source or --session, else newest first)'
complete -c memvault -n '__fish_seen_subcommand_from recent' -l full -d 'Show whole texts (all their lines), not cut to fit'
complete -c memvault -n '__fish_seen_subcommand_from recent' -l json -d 'Print one JSON document on stdout'
complete -c memvault -n '__fish_seen_subcommand_from recent' -l vault -x -d 'Vault directory (default: MEMVAULT_VAULT, else the enclosing vault, else the default vault); also accepted before the command'
complete -c memvault -n '__fish_seen_subcommand_from recent' -l help -s h -d 'Show help and exit'
complete -c memvault -n '__fish_seen_subcommand_from history' -l json -d 'Print one JSON document on stdout'
complete -c memvault -n '__fish_seen_subcommand_from history' -l vault -x -d 'Vault directory (default: MEMVAULT_VAULT, else the enclosing vault, else the default vault); also accepted before the command'
complete -c memvault -n '__fish_seen_subcommand_from history' -l help -s h -d 'Show help and exit'
complete -c memvault -n '__fish_seen_subcommand_from history' -a '(__memvault_fact_ids)'
complete -c memvault -n '__fish_seen_subcommand_from forget' -l reason -s r -x -d 'Why, for the audit trail: one line of printable text, at most 500 characters'
complete -c memvault -n '__fish_seen_subcommand_from forget' -l json -d 'Print one JSON document on stdout'
complete -c memvault -n '__fish_seen_subcommand_from forget' -l vault -x -d 'Vault directory (default: MEMVAULT_VAULT, else the enclosing vault, else the default vault); also accepted before the command'
complete -c memvault -n '__fish_seen_subcommand_from forget' -l help -s h -d 'Show help and exit'
complete -c memvault -n '__fish_seen_subcommand_from forget' -a '(__memvault_fact_ids)'
complete -c memvault -n '__fish_seen_subcommand_from purge' -l yes -s y -d 'Do not ask for confirmation (scripts); required without a terminal'
complete -c memvault -n '__fish_seen_subcommand_from purge' -l json -d 'Print one JSON document on stdout'
complete -c memvault -n '__fish_seen_subcommand_from purge' -l vault -x -d 'Vault directory (default: MEMVAULT_VAULT, else the enclosing vault, else the default vault); also accepted before the command'
complete -c memvault -n '__fish_seen_subcommand_from purge' -l help -s h -d 'Show help and exit'
complete -c memvault -n '__fish_seen_subcommand_from search' -l limit -s n -x -d 'How many hits to print (1-1000)'
complete -c memvault -n '__fish_seen_subcommand_from search' -l category -s c -x -a 'fact preference correction entity decision relationship principle commitment moment skill event' -d 'Only facts of this category'
complete -c memvault -n '__fish_seen_subcommand_from search' -l tag -s t -x -d 'Only facts and pages with this tag'
complete -c memvault -n '__fish_seen_subcommand_from search' -l source -x -d 'Only facts from this source'
complete -c memvault -n '__fish_seen_subcommand_from search' -l session -x -d 'Only facts of this session (one conversation)'
complete -c memvault -n '__fish_seen_subcommand_from search' -l since -x -d 'From this time on: 2026-11-01, yesterday, 7d, 12h'
complete -c memvault -n '__fish_seen_subcommand_from search' -l until -x -d 'Up to this time (a date includes the whole day)'
complete -c memvault -n '__fish_seen_subcommand_from search' -l all -d 'Also search facts already consolidated into the wiki'
complete -c memvault -n '__fish_seen_subcommand_from search' -l lexical -d 'Match words only; loads no model (no embedding, no reranker)'
complete -c memvault -n '__fish_seen_subcommand_from search' -l explain -d 'Show each ranking signal\'s contribution per hit, and the relevance floor'
complete -c memvault -n '__fish_seen_subcommand_from search' -l min-score -x -d 'Relevance floor: hide hits scoring below it (default 0.05; 0 shows every match)'
complete -c memvault -n '__fish_seen_subcommand_from search' -l no-rerank -d 'Rank without the reranker (faster, less often right first)'
complete -c memvault -n '__fish_seen_subcommand_from search' -l full -d 'Show whole texts (all their lines), not cut to fit'
complete -c memvault -n '__fish_seen_subcommand_from search' -l stdin -d 'One query per input line (text or JSON object); one result line each'
complete -c memvault -n '__fish_seen_subcommand_from search' -l json -d 'Print one JSON document on stdout'
complete -c memvault -n '__fish_seen_subcommand_from search' -l vault -x -d 'Vault directory (default: MEMVAULT_VAULT, else the enclosing vault, else the default vault); also accepted before the command'
complete -c memvault -n '__fish_seen_subcommand_from search' -l help -s h -d 'Show help and exit'
complete -c memvault -n '__fish_seen_subcommand_from reindex' -l clear -d 'Rebuild from scratch, aside, then swap it in (searches keep working)'
complete -c memvault -n '__fish_seen_subcommand_from reindex' -l download-model -d 'First fetch the embedding and rerank models from the hub into the user cache (searches never download)'
complete -c memvault -n '__fish_seen_subcommand_from reindex' -l json -d 'Print one JSON document on stdout'
complete -c memvault -n '__fish_seen_subcommand_from reindex' -l vault -x -d 'Vault directory (default: MEMVAULT_VAULT, else the enclosing vault, else the default vault); also accepted before the command'
complete -c memvault -n '__fish_seen_subcommand_from reindex' -l help -s h -d 'Show help and exit'
complete -c memvault -n '__fish_seen_subcommand_from context' -l budget -s b -x -d 'Most tokens the bundle may take (cl100k_base)'
complete -c memvault -n '__fish_seen_subcommand_from context' -l recent -x -d 'How many recent facts to consider (0: none)'
complete -c memvault -n '__fish_seen_subcommand_from context' -l relevant -x -d 'How many search hits to consider (0: none)'
complete -c memvault -n '__fish_seen_subcommand_from context' -l markdown -d 'Print the bundle as markdown (the default)'
complete -c memvault -n '__fish_seen_subcommand_from context' -l json -d 'Print one JSON document on stdout'
complete -c memvault -n '__fish_seen_subcommand_from context' -l vault -x -d 'Vault directory (default: MEMVAULT_VAULT, else the enclosing vault, else the default vault); also accepted before the command'
complete -c memvault -n '__fish_seen_subcommand_from context' -l help -s h -d 'Show help and exit'
complete -c memvault -n '__fish_seen_subcommand_from sessions' -l since -x -d 'Only facts from this time on: 2026-11-01, yesterday, 7d, 12h'
complete -c memvault -n '__fish_seen_subcommand_from sessions' -l until -x -d 'Only facts up to this time (a date includes the whole day)'
complete -c memvault -n '__fish_seen_subcommand_from sessions' -l source -x -d 'Only sessions of this source'
complete -c memvault -n '__fish_seen_subcommand_from sessions' -l json -d 'Print one JSON document on stdout'
complete -c memvault -n '__fish_seen_subcommand_from sessions' -l vault -x -d 'Vault directory (default: MEMVAULT_VAULT, else the enclosing vault, else the default vault); also accepted before the command'
complete -c memvault -n '__fish_seen_subcommand_from sessions' -l help -s h -d 'Show help and exit'
complete -c memvault -n '__fish_seen_subcommand_from completions' -l json -d 'Print one JSON document on stdout'
complete -c memvault -n '__fish_seen_subcommand_from completions' -l help -s h -d 'Show help and exit'
complete -c memvault -n '__fish_seen_subcommand_from completions' -a 'bash zsh fish'
complete -c memvault -n '__fish_seen_subcommand_from dream' -l dry-run -d 'Print the plan and the model\'s proposed operations for the first batch; write nothing'
complete -c memvault -n '__fish_seen_subcommand_from dream' -l max-batches -x -d 'Stop after N batches, 0 or more (default: until caught up)'
complete -c memvault -n '__fish_seen_subcommand_from dream' -l min-facts -x -d 'Skip a quiet night: do nothing unless at least N facts are pending (0 or more)'
complete -c memvault -n '__fish_seen_subcommand_from dream' -l model -x -d 'litellm model string (default: MEMVAULT_MODEL, then llm.model in memvault.toml)'
complete -c memvault -n '__fish_seen_subcommand_from dream' -l undo -d 'Revert the last applied dream batch (commits that only logged a failure are passed over)'
complete -c memvault -n '__fish_seen_subcommand_from dream' -l status -d 'Show the watermark, pending days and facts, and the last result'
complete -c memvault -n '__fish_seen_subcommand_from dream' -l json -d 'Print one JSON document on stdout'
complete -c memvault -n '__fish_seen_subcommand_from dream' -l vault -x -d 'Vault directory (default: MEMVAULT_VAULT, else the enclosing vault, else the default vault); also accepted before the command'
complete -c memvault -n '__fish_seen_subcommand_from dream' -l help -s h -d 'Show help and exit'
complete -c memvault -n '__fish_seen_subcommand_from status' -l json -d 'Print one JSON document on stdout'
complete -c memvault -n '__fish_seen_subcommand_from status' -l vault -x -d 'Vault directory (default: MEMVAULT_VAULT, else the enclosing vault, else the default vault); also accepted before the command'
complete -c memvault -n '__fish_seen_subcommand_from status' -l help -s h -d 'Show help and exit'
complete -c memvault -n '__fish_seen_subcommand_from doctor' -l fix -d 'Repair what is safe: commit leftovers, reindex, install the merge driver, re-create a lost repository'
complete -c memvault -n '__fish_seen_subcommand_from doctor' -l llm -d 'Also send the dream model one tiny request, to check it answers'
complete -c memvault -n '__fish_seen_subcommand_from doctor' -l json -d 'Print one JSON document on stdout'
complete -c memvault -n '__fish_seen_subcommand_from doctor' -l vault -x -d 'Vault directory (default: MEMVAULT_VAULT, else the enclosing vault, else the default vault); also accepted before the command'
complete -c memvault -n '__fish_seen_subcommand_from doctor' -l help -s h -d 'Show help and exit'
complete -c memvault -n '__fish_seen_subcommand_from sync' -l json -d 'Print one JSON document on stdout'
complete -c memvault -n '__fish_seen_subcommand_from sync' -l vault -x -d 'Vault directory (default: MEMVAULT_VAULT, else the enclosing vault, else the default vault); also accepted before the command'
complete -c memvault -n '__fish_seen_subcommand_from sync' -l help -s h -d 'Show help and exit'
complete -c memvault -n '__fish_seen_subcommand_from clone' -l json -d 'Print one JSON document on stdout'
complete -c memvault -n '__fish_seen_subcommand_from clone' -l help -s h -d 'Show help and exit'
complete -c memvault -n '__fish_seen_subcommand_from mcp' -l http -d 'Serve streamable HTTP on 127.0.0.1 (at /mcp) instead of stdio'
complete -c memvault -n '__fish_seen_subcommand_from mcp' -l port -x -d 'Port for --http (1-65535)'
complete -c memvault -n '__fish_seen_subcommand_from mcp' -l vault -x -d 'Vault directory (default: MEMVAULT_VAULT, else the enclosing vault, else the default vault); also accepted before the command'
complete -c memvault -n '__fish_seen_subcommand_from mcp' -l help -s h -d 'Show help and exit'
complete -c memvault -n '__fish_seen_subcommand_from remote && not __fish_seen_subcommand_from set show' -a set -d 'Set the remote `memvault sync` uses (no network access until then)'
complete -c memvault -n '__fish_seen_subcommand_from remote && not __fish_seen_subcommand_from set show' -a show -d 'Show the remote, and how far this vault is ahead of or behind it as of the last sync'
complete -c memvault -n '__fish_seen_subcommand_from remote && not __fish_seen_subcommand_from set show' -l json -d 'Print one JSON document on stdout'
complete -c memvault -n '__fish_seen_subcommand_from remote && not __fish_seen_subcommand_from set show' -l vault -x -d 'Vault directory (default: MEMVAULT_VAULT, else the enclosing vault, else the default vault); also accepted before the command'
complete -c memvault -n '__fish_seen_subcommand_from remote && not __fish_seen_subcommand_from set show' -l help -s h -d 'Show help and exit'
complete -c memvault -n '__fish_seen_subcommand_from remote && __fish_seen_subcommand_from set' -l json -d 'Print one JSON document on stdout'
complete -c memvault -n '__fish_seen_subcommand_from remote && __fish_seen_subcommand_from set' -l vault -x -d 'Vault directory (default: MEMVAULT_VAULT, else the enclosing vault, else the default vault); also accepted before the command'
complete -c memvault -n '__fish_seen_subcommand_from remote && __fish_seen_subcommand_from set' -l help -s h -d 'Show help and exit'
complete -c memvault -n '__fish_seen_subcommand_from remote && __fish_seen_subcommand_from show' -l json -d 'Print one JSON document on stdout'
complete -c memvault -n '__fish_seen_subcommand_from remote && __fish_seen_subcommand_from show' -l vault -x -d 'Vault directory (default: MEMVAULT_VAULT, else the enclosing vault, else the default vault); also accepted before the command'
complete -c memvault -n '__fish_seen_subcommand_from remote && __fish_seen_subcommand_from show' -l help -s h -d 'Show help and exit'
