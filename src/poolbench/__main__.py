from poolbench.cli.main import main

main()
