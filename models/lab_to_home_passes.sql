-- Pattern-window paper, Example 6 as rows (the paper's RSTREAM of SELECT *): every place
-- passed between the laboratory and home, one row per buffered event of the windows of
-- paper_ex6_lab_to_home_passes, with its position in the window.
WITH passes AS (
  SELECT w.match_id, w.start_ts AS left_lab, w.end_ts AS arrived_home, p.pos, p.event_id
  FROM matches_paper_ex6_lab_to_home_passes AS w
  LATERAL VIEW posexplode(w.bindings['buffer']) p AS pos, event_id
)
SELECT p.match_id, e.person, p.pos + 1 AS step, e.location, e.ts, p.left_lab, p.arrived_home
FROM passes AS p
JOIN events_locations AS e ON e.event_id = p.event_id
