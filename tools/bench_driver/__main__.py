"""python3 -m bench_driver: tools/bench-report.sh's driver."""
import sys

from .main import main

sys.exit(main())
