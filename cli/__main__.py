"""`python -m toolgate.cli`: what `toolgate up` runs for each worker and the tests run."""

from toolgate.cli.main import main

main()
