# Sourced by the scripts that debootstrap a root: the Debian mirror (and its
# security mirror, if any) this host's apt uses, so that no host name is
# written into the scripts.
debian_mirror() {
  local m
  m=$(awk '/^URIs:/ && !/security/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  [[ -n $m ]] || m=$(awk '$1 == "deb" && !/security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  [[ -n $m ]] || { echo "no Debian mirror in this host's apt sources" >&2; return 1; }
  echo "$m"
}

debian_security_mirror() {
  awk '/^URIs:/ && /security/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true
}
