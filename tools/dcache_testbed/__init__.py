"""Real ganesha.nfsd servers for the end-to-end tests, the demo and the
benchmark.

  releases   the Ganesha releases (ci/releases.tsv, the one table)
"""
