"""`noema demo`: scripted chapters that show the real stack at work, offline."""
