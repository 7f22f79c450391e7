from mibspec.cli import main

main()
