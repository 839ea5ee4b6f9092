import sys

from gavelsched.cli import main

sys.exit(main())
