"""``python -m benchmarks NAME``: the benchmark behind a published number (see
``benchmarks/published.py``; ``python -m benchmarks --list`` names them all)."""

from benchmarks.published import main

raise SystemExit(main())
