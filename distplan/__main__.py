import sys

from distplan.cli import main

sys.exit(main())
