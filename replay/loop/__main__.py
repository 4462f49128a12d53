import sys

from replay.loop.cli import main

if __name__ == "__main__":
    sys.exit(main())
