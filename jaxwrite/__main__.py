import sys

from jaxwrite.cli import main

sys.exit(main())
