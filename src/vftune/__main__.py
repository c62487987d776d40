from vftune.cli import main

main()
