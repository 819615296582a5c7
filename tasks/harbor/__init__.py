"""Harbor task directories (Terminal-Bench 2's format): read into our tasks and written from them."""
