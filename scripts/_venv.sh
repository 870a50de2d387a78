# Sourced by demo.sh, test.sh and docs.sh (not run on its own). `ensure_venv NAME PIP-ARGS...`
# makes sure the virtualenv ${VENV:-.venv} has this tree installed (editable) with PIP-ARGS
# (e.g. --group test). It installs on the first run and again only when pyproject.toml or
# PIP-ARGS changed: a stamp file in the venv holds the sha256 of pyproject.toml and the
# arguments it was installed with. A warm run therefore needs no package index at all.
# PYTHON picks the interpreter a new venv is made with (python3 by default).
ensure_venv() {
  local name=$1
  shift
  venv=${VENV:-.venv}
  local stamp="$venv/.mrtr-installed-$name"
  local want
  want="$(sha256sum pyproject.toml | cut -d' ' -f1) $*"
  if [[ -x "$venv/bin/python" && -f "$stamp" && "$(<"$stamp")" == "$want" ]]; then
    return 0
  fi
  if [[ $# -eq 0 && -x "$venv/bin/python" ]]; then  # the tree alone: any current install has it
    local other
    for other in "$venv"/.mrtr-installed-*; do
      if [[ -f "$other" && "$(head -c 64 "$other")" == "${want:0:64}" ]]; then return 0; fi
    done
  fi
  if [[ ! -x "$venv/bin/python" ]]; then "${PYTHON:-python3}" -m venv "$venv"; fi
  echo "setting up $venv ($name): pip install -e . $*" >&2
  rm -f "$stamp"
  "$venv/bin/python" -m pip install --quiet --upgrade 'pip>=25.1'  # 25.1: --group (PEP 735)
  "$venv/bin/python" -m pip install --quiet -e . "$@"
  printf '%s\n' "$want" >"$stamp"
}
