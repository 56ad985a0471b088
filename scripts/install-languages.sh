#!/usr/bin/env bash
# Installs the toolchains of sandbox-run's languages from Debian's packages
# (and npm's registry for the few that live there), only what is missing:
# running it again changes nothing. Debian 12, as root.
#
#   bash scripts/install-languages.sh            install what is missing
#   bash scripts/install-languages.sh --core     only the core eight languages
#                                                (what `go test ./...` needs)
#   bash scripts/install-languages.sh --dry-run  only say what it would install
#
# Trim the lists below to the languages you want; a language whose toolchain
# is not installed is simply listed as unavailable (`sandbox-run languages`).
# pyenv's Pythons and rustup's toolchains are not installed here (see
# docs/LANGUAGES.md); Debian's rustc is the fallback when rustup has none.
set -euo pipefail

# ---------------------------------------------------------------------------
# PACKAGES: Debian packages, one language (or a few) per line. Extend it: add
# your language's packages in a block of their own, with a comment.
PACKAGES=(
	# core: the languages CI requires
	gcc
	g++
	python3
	nodejs
	openjdk-17-jdk-headless
	bash
	perl
	tcl
	# a static busybox: the tests build small OCI images around it
	busybox-static
	# interpreter sessions' charts and tables
	python3-matplotlib python3-pandas
	# languages.d/batch-a.yaml
	ruby php-cli
	lua5.1 lua5.2 lua5.3 lua5.4
	r-base-core
	ghc
	ocaml-nox
	gfortran
	fp-compiler
	guile-3.0
	sbcl clisp ecl
	swi-prolog-nox gprolog
	erlang-nox elixir
	gawk mawk original-awk
	sqlite3
	chicken-bin
	gforth
	# languages.d/batch-b.yaml
	mono-mcs mono-runtime
	gdc ldc
	gnat
	clojure scala kotlin groovy
	racket
	valac
	gnucobol
	yabasic
	nasm
	gobjc
	nim
	polyml
	hugs
	pypy3
	clang
	coffeescript
	octave
)
# NPM_PACKAGES: installed globally with npm (which is installed when needed).
NPM_PACKAGES=(
	# languages.d/batch-b.yaml: TypeScript's compiler and Node's types
	typescript@7.0.2
	@types/node@20
)
# ---------------------------------------------------------------------------

# CORE: the packages of the eight core languages (python, javascript, go,
# rust, java, bash, c, cpp; Go itself is at /usr/local/go), of perl and
# tcl, which the tests also use, busybox-static, which the image tests put
# in their images, and the interpreter sessions' python3-matplotlib and
# python3-pandas: the top block of PACKAGES.
CORE=(gcc g++ python3 nodejs openjdk-17-jdk-headless bash perl tcl busybox-static python3-matplotlib python3-pandas)

dry_run=false
for arg in "$@"; do
	case "$arg" in
	--dry-run | -n) dry_run=true ;;
	--core)
		PACKAGES=("${CORE[@]}")
		NPM_PACKAGES=()
		;;
	*)
		echo "usage: $0 [--core] [--dry-run]" >&2
		exit 2
		;;
	esac
done
export DEBIAN_FRONTEND=noninteractive

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

missing=()
for p in "${PACKAGES[@]}"; do
	installed "$p" || missing+=("$p")
done
# Rust: rustup's stable toolchain when there is one, else Debian's rustc.
if ! ls ~/.rustup/toolchains/stable-*/bin/rustc >/dev/null 2>&1 && ! installed rustc; then
	missing+=(rustc)
fi
if [ ${#NPM_PACKAGES[@]} -gt 0 ] && ! command -v npm >/dev/null; then
	installed npm || missing+=(npm)
fi

if [ ${#missing[@]} -gt 0 ]; then
	echo "install-languages: installing ${missing[*]}"
	if ! $dry_run; then
		apt-get update -qq
		apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	fi
else
	echo "install-languages: all ${#PACKAGES[@]} Debian packages present"
fi

npm_missing=()
for p in "${NPM_PACKAGES[@]}"; do
	if ! command -v npm >/dev/null || ! npm ls -g --depth=0 "$p" >/dev/null 2>&1; then
		npm_missing+=("$p")
	fi
done
if [ ${#npm_missing[@]} -gt 0 ]; then
	echo "install-languages: npm install -g ${npm_missing[*]}"
	$dry_run || npm install -g --no-audit --no-fund "${npm_missing[@]}" >/dev/null
fi
