"""`evaltui report`: a run as one self-contained HTML file (command.py: the command line;
source.py: what is read, through the follower's views and the work-dir records; rows.py: the
samples packed for the page; timing.py: latency and throughput; page.py: the file itself;
report.css and report.js: the page's style and script, inlined)."""
