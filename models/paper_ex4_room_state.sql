-- Pattern-window paper, Example 4: the state of the room a person is in right after
-- the laboratory. The window (Example 2's, without its WHERE) is the pattern
-- paper_ex4_next_room; RoomState[Range 2 min] is the reference table room_state, joined
-- on the room over the two minutes up to the moment the person arrived.
SELECT w.person,
       r.state,
       w.location AS room,
       w.arrived,
       r.ts AS state_at
FROM matches_paper_ex4_next_room AS w
JOIN reference_room_state AS r
  ON r.room = w.location
 AND r.ts BETWEEN w.arrived - INTERVAL 2 MINUTES AND w.arrived
WHERE w.location <> 'Lab'
