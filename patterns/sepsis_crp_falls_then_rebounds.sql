-- A CRP peak, one or more falls, then a rebound: each CRP measurement of the patient
-- compared with the one before it; the other events in between are excluded from the
-- output rows but do not break the match. Within 30 days of the peak.
SELECT * FROM sepsis MATCH_RECOGNIZE (
  PARTITION BY patient
  ORDER BY ts
  MEASURES
    FIRST(PEAK.value) AS peak_crp,
    min(FALL.value) AS lowest_crp,
    LAST(REBOUND.value) AS rebound_crp,
    count(FALL.*) AS falls,
    LAST(REBOUND.ts) - FIRST(PEAK.ts) AS seconds_to_rebound
  ONE ROW PER MATCH
  AFTER MATCH SKIP TO LAST REBOUND
  PATTERN (PEAK ({- O* -} FALL)+ {- O* -} REBOUND)
  WITHIN INTERVAL '30' DAY
  SUBSET CRP = (PEAK, FALL, REBOUND)
  DEFINE
    PEAK AS event_type = 'CRP' AND value IS NOT NULL,
    O AS event_type <> 'CRP' OR value IS NULL,
    FALL AS event_type = 'CRP' AND value < LAST(CRP.value, 1),
    REBOUND AS event_type = 'CRP' AND value > LAST(CRP.value, 1)
) AS m
