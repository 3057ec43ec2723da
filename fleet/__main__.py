from fleet.cli import run

run()
