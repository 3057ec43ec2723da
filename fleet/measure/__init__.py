"""What repeated measurements of a figure say, and what they do not: summaries with intervals,
speed-up ratios with their own intervals, verdicts and rankings that never claim more than the
intervals separate. Pure functions, standard library only (see `fleet.measure.stats`)."""
