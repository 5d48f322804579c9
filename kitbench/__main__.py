import sys

from kitbench._cli import main

sys.exit(main())
