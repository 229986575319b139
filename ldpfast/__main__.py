from ldpfast.cli import main

raise SystemExit(main())
