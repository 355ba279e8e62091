# Sourced by the scripts that run ganesha.nfsd away from the machine's own
# system bus (tests/e2e/with_server.sh, ci/demo.sh): the configuration of a
# private dbus-daemon that acts as a system bus, on which ganesha.nfsd may
# own org.ganesha.nfsd (its policy file is included) and root may call it.
#   private_dbus_conf SOCKET >FILE; dbus-daemon --config-file=FILE ...
#   DBUS_SYSTEM_BUS_ADDRESS=unix:path=SOCKET for the server and its callers
# shellcheck shell=bash
private_dbus_conf() {
  cat <<EOF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=$1</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="root"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
  <include ignore_missing="yes">/etc/dbus-1/system.d/nfs-ganesha-dbus.conf</include>
</busconfig>
EOF
}
