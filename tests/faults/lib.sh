# Shared set-up of the fault scripts (sourced, not run): a simulated fabric from scripts/netns-rails.sh
# that is removed on exit, with a scratch folder.
#
#   fault_fabric PREFIX SOURCE_DIR HOSTS RAILS RATE
# Skips the test (exit 77) when not root. Afterwards: $rails (the netns-rails.sh command, prefix set
# through RERAIL_NETNS_PREFIX), $work (scratch folder); every rail of every host limited to RATE (tc
# tbf; slow rails keep a run going well past its faults on a loaded 2-core machine).
# fault_cleanup removes both (also run on exit; safe to run twice). fault_finish does it at the end
# of a passing script and fails it (exit 1) if a namespace of the fabric is left.
fault_cleanup() { $rails down >/dev/null 2>&1; rm -rf "$work"; }
fault_finish() {
  fault_cleanup
  trap - EXIT
  if ip netns list | grep -q "^$RERAIL_NETNS_PREFIX-"; then echo "FAIL: namespaces left after down"; exit 1; fi
}

fault_fabric() {
  local prefix=$1 src=$2 hosts=$3 nrails=$4 rate=$5 h r
  if [ "$(id -u)" -ne 0 ]; then echo "SKIP: needs root (network namespaces, tc)"; exit 77; fi
  export RERAIL_NETNS_PREFIX=$prefix
  rails="bash $src/scripts/netns-rails.sh"
  work=$(mktemp -d)
  trap fault_cleanup EXIT
  $rails down >/dev/null 2>&1
  $rails up "$hosts" "$nrails" >/dev/null || { echo "FAIL: netns-rails.sh up"; exit 1; }
  for ((h = 0; h < hosts; h++)); do
    for ((r = 0; r < nrails; r++)); do $rails slow $h $r "$rate" >/dev/null || exit 1; done
  done
}
