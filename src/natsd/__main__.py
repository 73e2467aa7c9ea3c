import sys

from natsd.main import main

sys.exit(main())
