"""Real ganesha.nfsd servers for the end-to-end tests, the demo and the
benchmark: the one library that starts and stops them.

  releases   the Ganesha releases (ci/releases.tsv, the one table)
  exports    the EXPORT blocks (the one place that writes them)
  server     a server on a loop filesystem in namespaces of its own
  heads      several servers on one filesystem and one network (clusters)
  clients    NFS clients rewriting and verifying files beside a test
  ceph       one ceph-mon and one ceph-osd on the heads' network
  ctdb       a ctdbd in each head's namespaces
  stats      the plugin's counters, read through tools/dcache-stats
  nfs        clients: libnfs's nfs-cp, nfs-cat, nfs-ls in a server's network
  inroot     a command chrooted in a release's root (Release.chroot_argv)
  gtest      the C++ end-to-end programs run against a server, judged
  matrix     the server variants: filesystem x backend x RWF_DONTCACHE
  cgroups    cgroup v1 groups for a server (a memory limit, a device throttle)
  freshroot  a new Debian root of a suite, as a new machine has it

Everything a server needs is made when it starts and undone when it stops,
also when a step fails, in the reverse order (contextlib.ExitStack): loop
devices, mounts, network namespaces, rpcbind, dbus-daemon, ganesha.nfsd.
Every process is a child of the caller and dies with it (setpriv
--pdeathsig KILL).
"""
