from yui_cli.main import main

main()
