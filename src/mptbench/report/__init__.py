"""The report: summary.csv, the diagnosis, plots and the HTML page."""
