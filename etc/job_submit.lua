--[[
 slurm-pilot job_submit/lua: long jobs need a granted pilot reservation.

 A job whose time limit exceeds MAX_UNPILOTED_DAYS must run inside a
 reservation pilot_JOBID (created by `pilot grant` after a GO verdict)
 whose Users include the submitting user, name that pilot with
 --pilot-run=JOBID, and stay within the grant record `pilot grant` wrote
 (GRANTS_DIR/JOBID.json, root's: its user, node count and duration);
 otherwise the submission is rejected with a message that names `pilot
 verdict` and pilot(1). Nothing the user sent is trusted for the bounds:
 the job's --pilot-run (its spank_job_env) only has to name the pilot
 whose record admits it, and the node then checks that the job is the
 piloted run (spank_pilot(8), BINDING).

 Install: copy to the directory of slurm.conf as job_submit.lua and set
 JobSubmitPlugins=lua (Slurm 22.05: slurm_job_submit(job_desc, part_list,
 submit_uid)). Keep MAX_UNPILOTED_DAYS equal to the policy's
 thresholds.max_unpiloted_days (pilot.conf(5)).
--]]

-- Site settings.
MAX_UNPILOTED_DAYS = 7
RESERVATION_PREFIX = "pilot_"
-- Grants recorded by `pilot grant` (<state_dir>/grants), consulted when
-- slurmctld does not expose the reservation table (an empty string: never).
GRANTS_DIR = "/var/lib/slurm-pilot/grants"

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
	if limit == INFINITE or limit > rec.duration then
		return string.format("its time limit exceeds the grant of job %s (%.1f days)", job, rec.duration / 1440)
	end
	return nil
end

function pilot_check(job_desc, part_list, submit_uid)
	local limit = time_limit_minutes(job_desc, part_list)
	local max_minutes = MAX_UNPILOTED_DAYS * 24 * 60
	if limit == nil or (limit ~= INFINITE and limit <= max_minutes) then
		return slurm.SUCCESS, nil
	end
	local user = job_desc.user_name
	local resv = job_desc.reservation
	local why
	if resv == nil or resv == "" then
		why = "it names no reservation"
	else
		for name in string.gmatch(resv, "[^,]+") do
			if string.sub(name, 1, #RESERVATION_PREFIX) == RESERVATION_PREFIX then
				why = grant_refusal(name, job_desc, user, limit)
				if why == nil then return slurm.SUCCESS, nil end
			end
		end
		why = why or ("reservation " .. resv .. " is not a pilot_* reservation")
	end
	local shown = (limit == INFINITE) and "unlimited" or string.format("%.1f days", limit / 1440)
	local msg = string.format(
		"pilot: job rejected: time limit %s exceeds %d days without a pilot reservation (%s). " ..
		"Run a pilot (sbatch --pilot=CONFIG), read it with `pilot verdict JOBID`, and ask an " ..
		"administrator for `pilot grant`; then submit with --reservation=pilot_JOBID --pilot-run=JOBID. " ..
		"See pilot(1).",
		shown, MAX_UNPILOTED_DAYS, why)
	return slurm.ERROR, msg
end

function slurm_job_submit(job_desc, part_list, submit_uid)
	local rc, msg = pilot_check(job_desc, part_list, submit_uid)
	if rc ~= slurm.SUCCESS then
		slurm.log_user(msg)
		slurm.log_info("pilot: rejected job of uid %d: %s", submit_uid, msg)
	end
	return rc
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
	if modify_uid == 0 then return slurm.SUCCESS end  -- administrators
	-- Extending a running job's time limit past the limit needs the same grant.
	if job_desc.time_limit ~= nil and job_desc.time_limit ~= NO_VAL then
		local d = {
			time_limit = job_desc.time_limit,
			reservation = job_desc.reservation or job_rec.resv_name,
			user_name = job_desc.user_name or job_rec.user_name,
			spank_job_env = job_rec.spank_job_env,
			min_nodes = (job_desc.min_nodes ~= nil and job_desc.min_nodes ~= NO_VAL) and job_desc.min_nodes or job_rec.min_nodes,
		}
		local rc, msg = pilot_check(d, part_list, modify_uid)
		if rc ~= slurm.SUCCESS then
			slurm.log_user(msg)
			return rc
		end
	end
	return slurm.SUCCESS
end

return slurm.SUCCESS
