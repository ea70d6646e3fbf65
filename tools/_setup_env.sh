# Sourced by tools/test.sh and tools/demo.sh: create (once) a virtual environment and install yolo3.
# VENV may be set to use another location; PYTHON picks the interpreter (default python3.11, then python3).
yolo3_setup_env() {
  local extra="${1:-}"
  VENV="${VENV:-$PWD/.venv}"
  local py="${PYTHON:-}"
  if [[ -z "$py" ]]; then
    if command -v python3.11 >/dev/null 2>&1; then py=python3.11; else py=python3; fi
  fi
  if [[ ! -x "$VENV/bin/python" ]]; then
    echo "Creating virtual environment in $VENV" >&2
    "$py" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip >&2
  fi
  local stamp="$VENV/.yolo3-installed-$extra"
  if [[ ! -f "$stamp" || setup.py -nt "$stamp" ]]; then
    yolo3_warn_low_disk "$VENV" 6 "the install (TensorFlow, Keras and the extras take about 5 GB)"
  fi
  # Reinstall when setup.py changed since the last install.
  if [[ ! -f "$stamp" || setup.py -nt "$stamp" ]]; then
    echo "Installing yolo3${extra:+[$extra]} into $VENV (first run takes a few minutes)" >&2
    if [[ -n "$extra" ]]; then
      "$VENV/bin/python" -m pip install -q -e ".[$extra]" >&2
    else
      "$VENV/bin/python" -m pip install -q -e . >&2
    fi
    touch "$stamp"
  fi
  export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
}

# yolo3_warn_low_disk PATH GB WHAT: one clear line when PATH's file system has under GB free
# (pip's own message is "OSError: [Errno 28] No space left on device", after minutes of work).
yolo3_warn_low_disk() {
  local path="$1" need_gb="$2" what="$3" free_kb
  free_kb="$(df -Pk "$(dirname "$path")" 2>/dev/null | awk 'NR==2 {print $4}')" || return 0
  [[ -n "$free_kb" ]] || return 0
  if (( free_kb < need_gb * 1024 * 1024 )); then
    echo "warning: $((free_kb / 1024)) MB free on the disk of $path; $what needs about" \
      "$need_gb GB: free some space if it fails with 'No space left on device'" >&2
  fi
}
