"""Speed measurements at full scale, each against the straightforward approach in the same run (`make bench`)."""
