import sys

from stuning.cli.main import main

sys.exit(main())
