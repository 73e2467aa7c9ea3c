import sys

from natsd.cli import main

sys.exit(main())
