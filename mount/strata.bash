# bash completion for strata: commands, each command's options and tags.
# Everything is asked of the command itself (`strata --help`, `strata
# COMMAND --help`, `strata tag`), so it completes what the installed
# strata has. Installed by meson where bash-completion looks.
# shellcheck shell=bash disable=SC2207 # COMPREPLY=($(compgen ...)): the usual completion idiom
_strata_words() { # the words of --help lines that start with a command or an option
	"$@" --help 2>/dev/null | sed -n 's/^  \(-[^ ]*, \)\{0,1\}\(--\{0,1\}[A-Za-z][A-Za-z0-9-]*\).*/\2/p'
}

_strata() {
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} cmd="" store=() i
	COMPREPLY=()
	for ((i = 1; i < COMP_CWORD; i++)); do
		case ${COMP_WORDS[i]} in
		-s | --store) store=(--store "${COMP_WORDS[i+1]}"); ((i++)) ;;
		--store=*) store=("${COMP_WORDS[i]}") ;;
		-b | --backend) ((i++)) ;;
		-*) ;;
		*) [ -z "$cmd" ] && cmd=${COMP_WORDS[i]} ;;
		esac
	done
	case $prev in
	-s | --store | --log | --output | --authfile | --cacert | --core | --guest | --json-file)
		COMPREPLY=($(compgen -f -- "$cur")); return ;;
	-b | --backend)
		COMPREPLY=($(compgen -W "auto kvm process" -- "$cur")); return ;;
	esac
	if [ -z "$cmd" ]; then
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "$(_strata_words strata)" -- "$cur"))
		else
			COMPREPLY=($(compgen -W "$(strata --help 2>/dev/null | sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z]*\) .*/\1/p')" -- "$cur"))
		fi
		return
	fi
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$(_strata_words strata "$cmd") --store --verbose" -- "$cur"))
		return
	fi
	case $cmd in
	help)
		COMPREPLY=($(compgen -W "$(strata --help 2>/dev/null | sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z]*\) .*/\1/p')" -- "$cur")) ;;
	show | rm | verify | export | push | tag | run | pool)
		# tags of the store, then files (run and pool take a guest ELF or a directory too)
		COMPREPLY=($(compgen -W "$(strata "${store[@]}" tag 2>/dev/null | cut -d' ' -f1)" -- "$cur") \
			$(compgen -f -- "$cur")) ;;
	*)
		COMPREPLY=($(compgen -f -- "$cur")) ;;
	esac
}
complete -F _strata strata
