from isrlab.cli import main

raise SystemExit(main())
