-- Episodes from ER registration to release per patient (the window pattern
-- sepsis_er_episode) with their duration, steps and number of lab tests (CRP,
-- leucocytes, lactic acid among the buffered events), joined with the patient's matches
-- of sepsis_rising_crp_then_icu that started during the episode.
WITH steps AS (
  SELECT w.match_id, s.event_id
  FROM matches_sepsis_er_episode AS w
  LATERAL VIEW explode(w.bindings['buffer']) s AS event_id
),
labs AS (
  SELECT s.match_id,
         count_if(e.event_type IN ('CRP', 'Leucocytes', 'LacticAcid')) AS lab_tests
  FROM steps AS s
  JOIN events_sepsis AS e ON e.event_id = s.event_id
  GROUP BY s.match_id
),
rising AS (
  SELECT w.match_id, count(m.match_id) AS rising_crp_to_icu
  FROM matches_sepsis_er_episode AS w
  JOIN matches_sepsis_rising_crp_then_icu AS m
    ON m.patient = w.patient AND m.start_ts BETWEEN w.start_ts AND w.end_ts
  GROUP BY w.match_id
)
SELECT w.match_id AS episode_id,
       w.patient,
       w.start_ts AS registered,
       w.end_ts AS released,
       w.`release`,
       round(w.hours, 2) AS hours,
       w.steps,
       coalesce(l.lab_tests, 0) AS lab_tests,
       coalesce(r.rising_crp_to_icu, 0) AS rising_crp_to_icu
FROM matches_sepsis_er_episode AS w
LEFT JOIN labs AS l ON l.match_id = w.match_id
LEFT JOIN rising AS r ON r.match_id = w.match_id
