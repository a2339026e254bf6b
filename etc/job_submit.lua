--[[
 slurm-pilot job_submit/lua: long jobs need a granted pilot reservation,
 and a pilot reservation runs only the run its pilot proved.

 A job whose time limit exceeds MAX_UNPILOTED_DAYS, or that names a
 reservation pilot_JOBID (created by `pilot grant` after a GO verdict),
 must run inside that reservation, whose Users include the submitting
 user, name that pilot with --pilot-run=JOBID, and stay within the grant
 record `pilot grant` wrote (GRANTS_DIR/JOBID.json, root's: its user, node
 count and duration); otherwise the submission is rejected with a message
 that names `pilot verdict` and pilot(1). A job that names a pilot with
 --pilot-run (a bound run) is submitted by `pilot run JOBID`, whose batch
 script the node replaces with the pilot's program.command (no script,
 command or allocation of its own), is one job, never an array, and one at
 a time per pilot: a second is rejected while the first is pending or running
 (the first one's requeues are the same job). Nothing the user sent is
 trusted for the bounds: the job's --pilot-run (its spank_job_env) only
 has to name the pilot whose record admits it, and the node then checks
 that the job is the piloted run (spank_pilot(8), BINDING).

 Changes after admission (slurm_job_modify): a bound job, or one in a
 pilot_* reservation, keeps its reservation and partition, is not made
 an array, and keeps to the grant's nodes and time. Slurm 22.05 discards
 a message of job_modify (slurm.log_user), so the user sees only the text
 of the error code returned here (the time limit, the node count, else
 "Access/permission denied"); the reason goes to slurmctld's log and to
 REFUSALS_DIR/JOBID.json, which `pilot explain JOBID` shows (pilot(1)).

 Install: copy to the directory of slurm.conf as job_submit.lua and set
 JobSubmitPlugins=lua (Slurm 22.05: slurm_job_submit(job_desc, part_list,
 submit_uid)). Keep MAX_UNPILOTED_DAYS equal to the policy's
 thresholds.max_unpiloted_days (pilot.conf(5)), and make REFUSALS_DIR a
 folder SlurmUser may write and users may read (install -d -o SlurmUser
 -m 0755 STATE/refusals).
--]]

-- Site settings.
MAX_UNPILOTED_DAYS = 7
RESERVATION_PREFIX = "pilot_"
-- Grants recorded by `pilot grant` (<state_dir>/grants), consulted when
-- slurmctld does not expose the reservation table (an empty string: never).
GRANTS_DIR = "/var/lib/slurm-pilot/grants"
-- Where a refused change is recorded for `pilot explain` (<state_dir>/refusals;
-- an empty string: nowhere but slurmctld's log).
REFUSALS_DIR = "/var/lib/slurm-pilot/refusals"

local NO_VAL = 4294967294
local INFINITE = 4294967295

-- The job's time limit in minutes, or nil when neither the job nor its
-- partitions set one.
local function time_limit_minutes(job_desc, part_list)
	local t = job_desc.time_limit
	if t ~= nil and t ~= NO_VAL then return t end
	-- No --time: the partition's default time, else its maximum.
	local want = job_desc.partition
	local limit = nil
	if part_list ~= nil then
		for _, part in pairs(part_list) do
			local name = part.name
			if want == nil or want == "" or (name ~= nil and string.find("," .. want .. ",", "," .. name .. ",", 1, true)) then
				local d = part.default_time
				if d == nil or d == NO_VAL then d = part.max_time end
				if d ~= nil and d ~= NO_VAL and (limit == nil or d > limit) then limit = d end
			end
		end
	end
	return limit
end

local function list_has(csv, item)
	if csv == nil or item == nil then return false end
	for entry in string.gmatch(csv, "[^,]+") do
		if entry == item then return true end
	end
	return false
end

-- The user names of reservation `name`: from slurmctld's table when the
-- plugin exposes it and the table has it, else from the grant record
-- `pilot grant` wrote. The plugin refreshes its copy of the table only when
-- slurmctld's reservation time stamp (whole seconds) is newer than the
-- copy's, so a reservation created in the same second as the last refresh
-- is missing from it until the next change.
local function reservation_users(name)
	if slurm.reservations ~= nil then
		local r = slurm.reservations[name]
		if r ~= nil then return r.users end
	end
	if GRANTS_DIR == "" then return nil end
	local job = string.match(name, "^" .. RESERVATION_PREFIX .. "(%d+)$")
	if job == nil then return nil end
	local f = io.open(GRANTS_DIR .. "/" .. job .. ".json", "r")
	if f == nil then return nil end
	local text = f:read(65536) or ""
	f:close()
	return string.match(text, '"user"%s*:%s*"([^"]*)"')
end

-- The pilot job the job names with --pilot-run (SLURM_PILOT_RUN in its
-- spank_job_env, set by the plugin at submission), or nil.
local function pilot_run(env)
	if env == nil then return nil end
	for _, entry in pairs(env) do
		local run = string.match(tostring(entry), "^SLURM_PILOT_RUN=(%d+)$")
		if run ~= nil then return run end
	end
	return nil
end

-- The grant record of pilot job `job` as `pilot grant` wrote it: user,
-- nodes and duration_minutes, or nil when there is none.
local function grant_record(job)
	if GRANTS_DIR == "" then return nil end
	local f = io.open(GRANTS_DIR .. "/" .. job .. ".json", "r")
	if f == nil then return nil end
	local text = f:read(1048576) or ""
	f:close()
	return {
		user = string.match(text, '"user"%s*:%s*"([^"]*)"'),
		nodes = tonumber(string.match(text, '"nodes"%s*:%s*(%d+)')),
		duration = tonumber(string.match(text, '"duration_minutes"%s*:%s*(%d+)')),
	}
end

-- Why the job may not run in pilot reservation `name` (nil: it may).
local function grant_refusal(name, job_desc, user, limit)
	local users = reservation_users(name)
	if users == nil then return "reservation " .. name .. " does not exist" end
	if not list_has(users, user) then
		return "reservation " .. name .. " is not granted to " .. tostring(user)
	end
	local job = string.match(name, "^" .. RESERVATION_PREFIX .. "(%d+)$")
	local rec = job and grant_record(job)
	if rec == nil or rec.user == nil or rec.nodes == nil or rec.duration == nil then
		return "reservation " .. name .. " has no readable grant record in " .. GRANTS_DIR
	end
	if rec.user ~= user then return "reservation " .. name .. " is not granted to " .. tostring(user) end
	local run = pilot_run(job_desc.spank_job_env)
	if run ~= job then
		return "it does not name its pilot: add --pilot-run=" .. job ..
			(run and (" (it names " .. run .. ")") or "")
	end
	local nodes = job_desc.min_nodes
	if nodes == nil or nodes == NO_VAL or nodes == 0 then nodes = 1 end
	if nodes > rec.nodes then
		return string.format("it asks for %d nodes, the grant of job %s is for %d", nodes, job, rec.nodes)
	end
	if limit ~= nil and (limit == INFINITE or limit > rec.duration) then
		return string.format("its time limit exceeds the grant of job %s (%.1f days)", job, rec.duration / 1440)
	end
	return nil
end

-- Whether the reservation list `resv` names a pilot_* reservation.
local function names_pilot_reservation(resv)
	if resv == nil then return false end
	for name in string.gmatch(resv, "[^,]+") do
		if string.sub(name, 1, #RESERVATION_PREFIX) == RESERVATION_PREFIX then return true end
	end
	return false
end

-- Why the job may not be admitted (nil: it may), whether its time limit is
-- past MAX_UNPILOTED_DAYS, and that limit. A job of at most that limit
-- outside every pilot_* reservation is not the gate's business; one in a
-- pilot_* reservation must be its pilot's run, whatever its length.
local function gate_refusal(job_desc, part_list)
	local limit = time_limit_minutes(job_desc, part_list)
	local max_minutes = MAX_UNPILOTED_DAYS * 24 * 60
	local long = limit ~= nil and (limit == INFINITE or limit > max_minutes)
	local resv = job_desc.reservation
	if not long and not names_pilot_reservation(resv) then return nil, long, limit end
	if resv == nil or resv == "" then return "it names no reservation", long, limit end
	local why
	for name in string.gmatch(resv, "[^,]+") do
		if string.sub(name, 1, #RESERVATION_PREFIX) == RESERVATION_PREFIX then
			why = grant_refusal(name, job_desc, job_desc.user_name, limit)
			if why == nil then return nil, long, limit end
		end
	end
	return why or ("reservation " .. resv .. " is not a pilot_* reservation"), long, limit
end

-- The message a refused submission shows.
local function rejection(why, long, limit)
	local way = "Run a pilot (sbatch --pilot=CONFIG), read it with `pilot verdict JOBID`, and ask an " ..
		"administrator for `pilot grant`; then submit with --reservation=pilot_JOBID --pilot-run=JOBID. " ..
		"See pilot(1)."
	if not long then
		return string.format("pilot: job rejected: a pilot_* reservation runs only its pilot's run (%s). %s",
			why, way)
	end
	local shown = (limit == INFINITE) and "unlimited" or string.format("%.1f days", limit / 1440)
	return string.format(
		"pilot: job rejected: time limit %s exceeds %d days without a pilot reservation (%s). %s",
		shown, MAX_UNPILOTED_DAYS, why, way)
end

function pilot_check(job_desc, part_list, submit_uid)
	local why, long, limit = gate_refusal(job_desc, part_list)
	if why == nil then return slurm.SUCCESS, nil end
	return slurm.ERROR, rejection(why, long, limit)
end

-- One grant, one run. A job's base state (job_state modulo 256, the flags
-- above it left out): pending, running or suspended still hold the grant.
local STATE_NAMES = { [0] = "pending", [1] = "running", [2] = "suspended" }
-- Pilot job id -> {time, submitted}: the last bound run admitted for it.
-- slurmctld hands this script a copy of its job table (slurm.jobs) that it
-- refreshes only when the table's time stamp (whole seconds) is newer than
-- the copy's, so a job admitted in the second of the last refresh can be
-- missing from it until the next change to any job; this memory covers
-- that gap.
local admitted = {}
local ADMITTED_MEMORY_SECONDS = 300

-- The pilot a reservation list names (pilot_JOBID), or nil.
local function reservation_pilot(resv)
	if resv == nil then return nil end
	for name in string.gmatch(resv, "[^,]+") do
		local job = string.match(name, "^" .. RESERVATION_PREFIX .. "(%d+)$")
		if job ~= nil then return job end
	end
	return nil
end

-- A job of slurmctld's table that holds pilot `pilot`'s grant: its id and
-- state name; nil when none. `seen_since`: whether the table lists any job
-- of the pilot submitted at or after that time (ended or not).
local function active_run(pilot, since)
	local seen = false
	if slurm.jobs == nil then return nil, nil, false end
	for id, j in pairs(slurm.jobs) do
		local mine = pilot_run(j.spank_job_env) == pilot or reservation_pilot(j.resv_name) == pilot
		if mine then
			local st = j.job_state
			local base = st and (st % 256)
			if base ~= nil and STATE_NAMES[base] ~= nil then return id, STATE_NAMES[base], true end
			if since ~= nil and (j.submit_time or 0) >= since then seen = true end
		end
	end
	return nil, nil, seen
end

-- The batch script of a bound run, byte for byte as `pilot run PILOT`
-- submits it (job/binding.cc, BoundRunScript): the node runs the pilot's
-- program.command in its place.
local function bound_run_script(pilot)
	return "#!/bin/sh\n" ..
		"# slurm-pilot: the run piloted by job " .. pilot .. ". Its tasks run the pilot's program.command\n" ..
		"# in place of this script (spank_pilot(8), BINDING); submitted by `pilot run " .. pilot .. "`.\n" ..
		"echo \"pilot: job $SLURM_JOB_ID: the run of pilot " .. pilot .. " needs spank_pilot.so on its node\" >&2\n" ..
		"exit 1\n"
end

-- Why a job that names a pilot (--pilot-run) may not be submitted (nil:
-- it may): a script or command of its own (an interactive allocation
-- included), an array, or a second run while one holds the grant.
local function bound_refusal(job_desc)
	local pilot = pilot_run(job_desc.spank_job_env)
	if pilot == nil then return nil end
	if job_desc.script ~= bound_run_script(pilot) then
		return "a run bound to pilot " .. pilot .. " runs the pilot's program.command, not a " ..
			(job_desc.script == nil and "command" or "script") .. " of its own: submit it with " ..
			"`pilot run " .. pilot .. " [SBATCH_OPTION...]`"
	end
	local array = job_desc.array_inx
	if array ~= nil and array ~= "" then
		return "a run bound to pilot " .. pilot .. " is one job, not an array (--array=" .. array ..
			"): submit it once, without --array"
	end
	local last = admitted[pilot]
	if last ~= nil and os.time() - last > ADMITTED_MEMORY_SECONDS then
		admitted[pilot] = nil
		last = nil
	end
	local other, state, seen = active_run(pilot, last)
	if other ~= nil then
		return string.format("pilot %s's grant admits one run at a time, and job %s is %s: wait for it to end, " ..
			"or scancel %s", pilot, tostring(other), state, tostring(other))
	end
	if last ~= nil and not seen then
		return string.format("pilot %s's grant admits one run at a time, and a run was admitted %d s ago: " ..
			"once it has ended, submit again", pilot, os.time() - last)
	end
	return nil
end

function slurm_job_submit(job_desc, part_list, submit_uid)
	local rc, msg = pilot_check(job_desc, part_list, submit_uid)
	if rc == slurm.SUCCESS then
		local why = bound_refusal(job_desc)
		if why ~= nil then
			rc, msg = slurm.ERROR, "pilot: job rejected: " .. why .. ". See spank_pilot(8), BINDING."
		end
	end
	if rc ~= slurm.SUCCESS then
		slurm.log_user(msg)
		slurm.log_info("pilot: rejected job of uid %d: %s", submit_uid, msg)
		return rc
	end
	local pilot = pilot_run(job_desc.spank_job_env)
	if pilot ~= nil then admitted[pilot] = os.time() end
	return rc
end

-- A JSON string of `s`: quotes, backslashes and control characters
-- escaped, bytes past ASCII as '?' (the names here are ASCII).
local function json_string(s)
	local t = string.gsub(tostring(s), "[%c\"\\\128-\255]", function(c)
		if c == '"' then return '\\"' end
		if c == "\\" then return "\\\\" end
		if string.byte(c) >= 128 then return "?" end
		return string.format("\\u%04x", string.byte(c))
	end)
	return '"' .. t .. '"'
end

-- Records a refused change in REFUSALS_DIR/JOBID.json (written beside and
-- renamed into place) for `pilot explain`: Slurm shows the user only the
-- error code's text.
local function record_refusal(job_rec, pilot, change, why, uid)
	if REFUSALS_DIR == "" or job_rec.job_id == nil then return end
	local path = string.format("%s/%d.json", REFUSALS_DIR, job_rec.job_id)
	local f = io.open(path .. ".new", "w")
	if f == nil then
		slurm.log_info("pilot: cannot record the refusal in %s", path)
		return
	end
	f:write(string.format('{\n  "schema": "slurm-pilot/refusal/1",\n  "job_id": %d,\n  "pilot_job": %s,\n' ..
		'  "user": %s,\n  "uid": %d,\n  "refused_at": %s,\n  "change": %s,\n  "reason": %s\n}\n',
		job_rec.job_id, pilot or "null", json_string(job_rec.user_name or ""), uid,
		json_string(os.date("!%Y-%m-%dT%H:%M:%SZ")), json_string(change), json_string(why)))
	f:close()
	os.rename(path .. ".new", path)
end

-- What a change asks for, in scontrol's words ("NumNodes=2 Reservation=").
local function change_text(d)
	local parts = {}
	local function add(key, v) table.insert(parts, key .. "=" .. tostring(v)) end
	if d.reservation ~= nil then add("Reservation", d.reservation) end
	if d.partition ~= nil then add("Partition", d.partition) end
	if d.min_nodes ~= nil and d.min_nodes ~= NO_VAL then add("MinNodes", d.min_nodes) end
	if d.max_nodes ~= nil and d.max_nodes ~= NO_VAL then add("MaxNodes", d.max_nodes) end
	if d.time_limit ~= nil and d.time_limit ~= NO_VAL then
		add("TimeLimit", d.time_limit == INFINITE and "UNLIMITED" or (d.time_limit .. "min"))
	end
	if d.array_inx ~= nil then add("ArrayTaskThrottle", d.array_inx) end
	return table.concat(parts, " ")
end

local function set(v) return v ~= nil and v ~= NO_VAL end

-- Why a change to a job may not be made (nil: it may), the error code
-- Slurm answers with (its text is all the user sees), and the pilot the
-- job is bound to. A bound job (--pilot-run) or one in a pilot_*
-- reservation keeps its reservation and partition, is never an array and
-- keeps to its grant's nodes; any job's new time limit or reservation
-- passes the submission's gate again, as the job would then be.
local function modify_refusal(job_desc, job_rec, part_list)
	local pilot = pilot_run(job_rec.spank_job_env) or reservation_pilot(job_rec.resv_name)
	local what = pilot and ("a run bound to pilot " .. pilot)
	if pilot ~= nil then
		if job_desc.array_inx ~= nil then
			return what .. " is one job, not an array", slurm.ESLURM_ACCESS_DENIED, pilot
		end
		local resv = job_rec.resv_name or ""
		if job_desc.reservation ~= nil and job_desc.reservation ~= resv then
			return string.format("%s stays in reservation %s (asked for %s)", what,
				resv == "" and "(none)" or resv, job_desc.reservation == "" and "none" or job_desc.reservation),
				slurm.ESLURM_ACCESS_DENIED, pilot
		end
		if job_desc.partition ~= nil and job_desc.partition ~= job_rec.partition then
			return string.format("%s stays in partition %s (asked for %s)", what, tostring(job_rec.partition),
				job_desc.partition), slurm.ESLURM_ACCESS_DENIED, pilot
		end
		local rec = grant_record(pilot)
		if rec ~= nil and rec.nodes ~= nil then
			for _, key in ipairs({ "min_nodes", "max_nodes" }) do
				local n = job_desc[key]
				if set(n) and n > rec.nodes then
					return string.format("%s may use at most %d node(s), the grant's (asked for %d)", what,
						rec.nodes, n), slurm.ESLURM_INVALID_NODE_COUNT, pilot
				end
			end
		end
	end
	if set(job_desc.time_limit) or job_desc.reservation ~= nil then
		local d = {
			time_limit = set(job_desc.time_limit) and job_desc.time_limit or job_rec.time_limit,
			reservation = job_desc.reservation or job_rec.resv_name,
			partition = job_desc.partition or job_rec.partition,
			user_name = job_desc.user_name or job_rec.user_name,
			spank_job_env = job_rec.spank_job_env,
			min_nodes = set(job_desc.min_nodes) and job_desc.min_nodes or job_rec.min_nodes,
		}
		local why = gate_refusal(d, part_list)
		if why ~= nil then
			local code = set(job_desc.time_limit) and slurm.ESLURM_INVALID_TIME_LIMIT or slurm.ESLURM_ACCESS_DENIED
			return why, code, pilot or reservation_pilot(d.reservation)
		end
	end
	return nil, slurm.SUCCESS, pilot
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
	if modify_uid == 0 then return slurm.SUCCESS end  -- administrators
	local why, code, pilot = modify_refusal(job_desc, job_rec, part_list)
	if why == nil then return slurm.SUCCESS end
	-- Slurm 22.05 discards slurm.log_user() here: the record and the log
	-- carry the reason, the code's text is what the user sees.
	local change = change_text(job_desc)
	slurm.log_info("pilot: refused change %s to job %s of uid %d: %s", change, tostring(job_rec.job_id),
		modify_uid, why)
	record_refusal(job_rec, pilot, change, why, modify_uid)
	return code
end

return slurm.SUCCESS
