# Sourced by the bench/ab scripts that time or profile Liger-Kernel: installs the
# wheel carried in .whl (the lent machines have no registry; bench/ab/norms_sweep.sh
# says how to download it) into /tmp/site and puts the checkout and /tmp/site on
# PYTHONPATH. Returns pip's status, so a caller decides whether Liger is required:
#   . bench/ab/liger_env.sh || exit 1                      (required)
#   . bench/ab/liger_env.sh || echo "liger wheel not installed"   (optional)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl
_liger_rc=$?
export PYTHONPATH="$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
return $_liger_rc
