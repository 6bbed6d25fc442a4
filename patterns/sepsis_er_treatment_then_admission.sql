-- From the ER registration, the two first treatments given one right after the other
-- in either order (antibiotics and fluids: PERMUTE), then an admission to a ward or to
-- intensive care; the fewest events in between (reluctant X*?).
SELECT * FROM sepsis MATCH_RECOGNIZE (
  PARTITION BY patient
  ORDER BY ts
  MEASURES
    FIRST(REG.ts) AS registered,
    CLASSIFIER(TREATMENT) AS second_treatment,
    LAST(ADM.event_type) AS admission,
    count(X.*) AS events_between,
    MATCH_NUMBER() AS episode
  ONE ROW PER MATCH
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (REG X*? PERMUTE(AB, LQ) X*? ADM)
  SUBSET TREATMENT = (AB, LQ)
  DEFINE
    REG AS event_type = 'ER Registration',
    AB AS event_type = 'IV Antibiotics',
    LQ AS event_type = 'IV Liquid',
    ADM AS event_type IN ('Admission IC', 'Admission NC')
) AS m
