import sys

if sys.argv[1:2] == ["sketch-server"]:
    # the engine child starts often and must be up fast: skip importing every CLI command
    # (same behaviour as `cantor sketch-server`, which hands the rest to the same parser)
    from .sketch.server import main as sketch_main

    sys.exit(sketch_main(sys.argv[2:]))

from .cli.main import main

sys.exit(main())
