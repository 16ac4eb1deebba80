"""`python -m vectorlog.demo`."""

from vectorlog.demo.run import main

main()
